// ncclNet_v11_t: NCCL 2.27+. init is per communicator and returns a context carrying commId and the
// communicator's traffic class; everything else forwards to net_common.
#include "abi/export.h"
#include "abi/net_v11.h"
#include "adapters/net_common.h"

namespace icn::adapters {
namespace {

ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t logger,
                  ncclProfilerCallback_t) {
  return netCtxInit(ctx, commId, config ? config->trafficClass : -1, logger);
}

ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) {
  ncclResult_t r = fillProps(dev, props);
  if (r == ncclSuccess) props->maxMultiRequestSize = 1;
  return r;
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) {
  return netListen(netCtxConfig(ctx), dev, handle, listenComm);
}

ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t** devComm) {
  return netConnect(netCtxConfig(ctx), dev, handle, sendComm, devComm);
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

ncclResult_t finalize(void* ctx) { return netCtxFinalize(ctx); }

ncclResult_t setNetAttr(void*, ncclNetAttr_v11_t* attr) {
  return attr ? netNoteAttr(attr->op, attr->algo, attr->proto) : ncclSuccess;
}

}  // namespace
}  // namespace icn::adapters

using namespace icn::adapters;
ICN_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    "ICN",        init,          netDevices,       getProperties, listen,      connect,
    accept,       netRegMr,      netRegMrDmaBuf,   netDeregMr,    isend,       irecv,
    netIflush,    netTest,       netCloseSend,     netCloseRecv,  netCloseListen,
    netGetDeviceMr, netIrecvConsumed, makeVDevice, finalize,      setNetAttr,
};
