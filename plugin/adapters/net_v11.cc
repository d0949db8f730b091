// ncclNet_v11_t: NCCL 2.27+. init is per communicator and returns a context carrying commId and the
// communicator's traffic class; everything else forwards to net_common.
#include <memory>

#include "abi/net_v11.h"
#include "adapters/net_common.h"
#include "core/log.h"

namespace icn::adapter {
namespace {

struct NetContext {
  CommConfig config;
};

CommConfig configOf(void* ctx) { return ctx ? static_cast<NetContext*>(ctx)->config : CommConfig{}; }

ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t logger,
                  ncclProfilerCallback_t) {
  if (!ctx) return ncclInvalidArgument;
  *ctx = nullptr;
  ncclResult_t r = netInit(logger);
  if (r != ncclSuccess) return r;
  auto c = std::make_unique<NetContext>();
  c->config.commId = commId;
  c->config.trafficClass = config ? config->trafficClass : -1;
  *ctx = c.release();
  return ncclSuccess;
}

ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) {
  ncclResult_t r = fillProps(dev, props);
  if (r == ncclSuccess) props->maxMultiRequestSize = 1;
  return r;
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  return netListen(configOf(ctx), dev, handle, listenComm);
}

ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t** devComm) {
  return netConnect(configOf(ctx), dev, handle, sendComm, devComm);
}

ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t** devComm) {
  return netAccept(listenComm, recvComm, devComm);
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
  return netIsend(sendComm, data, size, tag, mhandle, request);
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                   void** request) {
  return netIrecv(recvComm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t makeVDevice(int* d, ncclNetVDeviceProps_v11_t* props) {
  if (!props) return ncclInvalidArgument;
  return netMakeVDevice(d, props->ndevs, props->devs);
}

ncclResult_t finalize(void* ctx) {
  std::unique_ptr<NetContext> c(static_cast<NetContext*>(ctx));  // NULL when init failed
  netQuiesce();
  return ncclSuccess;
}

ncclResult_t setNetAttr(void* ctx, ncclNetAttr_v11_t* attr) {
  if (attr)
    ICN_TRACE(subsys::Net, "setNetAttr: op 0x%x algo 0x%x proto 0x%x (hints noted, no effect on this transport)",
              attr->op, attr->algo, attr->proto);
  return ncclSuccess;
}

}  // namespace
}  // namespace icn::adapter

using namespace icn::adapter;
extern "C" __attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
    "ICN",        init,          netDevices,       getProperties, listen,      connect,
    accept,       netRegMr,      netRegMrDmaBuf,   netDeregMr,    isend,       irecv,
    netIflush,    netTest,       netCloseSend,     netCloseRecv,  netCloseListen,
    netGetDeviceMr, netIrecvConsumed, makeVDevice, finalize,      setNetAttr,
};
