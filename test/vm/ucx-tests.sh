# The conformance suite with the UCX transport over rc_verbs on the rxe pair (UD as auxiliary transport for
# wire-up; GID index 0 because both rxe devices share one network namespace: IPv4 GIDs would route via lo).
# Lifecycle.* is run separately (vm.ucx-rc-lifecycle, see docs/readme/ib.md): it fails over rc_verbs here.
conformance conformance-ucx-rc "-Lifecycle.*" ICN_TRANSPORT=ucx UCX_TLS=rc_verbs,ud_verbs:aux UCX_IB_GID_INDEX=0 \
  ICN_CONF_RANK0_ENV="UCX_NET_DEVICES=rxe0:1" ICN_CONF_RANK1_ENV="UCX_NET_DEVICES=rxe1:1"
