# Lifecycle.* over UCX rc_verbs on the rxe pair: 24 comms from one listen comm, every close order, repeated
# connect/close without leaking. Each comm has its own UCP worker; connect/close costs ~2 s per cycle here
# (four workers with rc_verbs + ud_verbs interfaces, under full emulation), so 40 cycles instead of 150.
conformance conformance-ucx-rc-lifecycle "Lifecycle.*" ICN_TRANSPORT=ucx UCX_TLS=rc_verbs,ud_verbs:aux \
  UCX_IB_GID_INDEX=0 ICN_CONF_LIFECYCLE_CYCLES=40 ICN_CONF_RANK0_ENV="UCX_NET_DEVICES=rxe0:1" \
  ICN_CONF_RANK1_ENV="UCX_NET_DEVICES=rxe1:1"
