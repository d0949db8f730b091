# Known issue (registered DISABLED): many UCX comms / repeated connect-close over rc_verbs on rxe fail or hang.
conformance conformance-ucx-rc-lifecycle "Lifecycle.*" ICN_TRANSPORT=ucx UCX_TLS=rc_verbs,ud_verbs:aux \
  UCX_IB_GID_INDEX=0 ICN_COPY_THREADS=0 ICN_CONF_RANK0_ENV="UCX_NET_DEVICES=rxe0:1" \
  ICN_CONF_RANK1_ENV="UCX_NET_DEVICES=rxe1:1"
