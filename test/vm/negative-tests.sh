# Must make run-vm.sh fail with "1 passed, 1 failed": one passing and one failing check (ctest matches that verdict).
check harness-true 10 true
check harness-false 10 false
