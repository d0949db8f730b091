# Hostile verbs peers against the ib transport (test/adversary: icn-adversary-ib): the victim rank on rxe0, the
# honest rank and a raw-libibverbs rogue on rxe1, out-of-band sockets on lo; plus the handshake attacks with the
# ib transport (a peer without the key, replayed or rewritten HELLOs, trickled and flooding handshakes).
if [ ! -x /opt/icn/bin/icn-adversary-ib ]; then
  fail "adversary-ib (icn-adversary-ib not in this build)"
else
  if ICN_PLUGIN_PATH=/opt/icn/lib/libnccl-net-icn.so ICN_TRANSPORT=ib ICN_ADVERSARY_IB_DEV=rxe1 timeout 240 \
       icn-adversary-ib '--gtest_filter=Verbs/*:Adversary/Keyed.*:Adversary.HostName*:Adversary.Trickled*:Adversary.Flood*' \
       > /tmp/adversary-ib.log 2>&1; then rc=0; else rc=$?; fi
  grep -E '^\[ *(OK|FAILED) ' /tmp/adversary-ib.log | sed 's|^|adversary-ib: |'
  # What the victim said about each hostile verbs peer (the tests assert it names the peer's address).
  grep -E 'rank 0 .*WARN|NCCL result' /tmp/adversary-ib.log | grep -v handshake | head -n 40
  passed=$(grep -cE '^\[ *OK \]' /tmp/adversary-ib.log || true)
  result adversary_ib_tests_passed "$passed"
  if [ $rc = 0 ] && [ "$passed" -ge 20 ]; then pass "adversary-ib"
  else
    grep -E -A6 'Failure$' /tmp/adversary-ib.log | head -n 80
    fail "adversary-ib rc=$rc passed=$passed"
  fi
fi
