# Must make run-vm.sh fail: one passing and one failing check (registered with WILL_FAIL).
check harness-true 10 true
check harness-false 10 false
