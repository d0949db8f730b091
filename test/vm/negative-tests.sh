# Must make run-vm.sh fail with "2 passed, 1 failed" (the guest's rxe set-up, then these two; ctest matches it).
check harness-true 10 true
check harness-false 10 false
