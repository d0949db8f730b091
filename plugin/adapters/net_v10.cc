// ncclNet_v10_t: NCCL 2.26. Process-wide init; the traffic class arrives with each connect.
#include "abi/export.h"
#include "abi/net_v10.h"
#include "adapters/net_common.h"

namespace icn::adapters {
namespace {

ncclResult_t init(ncclDebugLogger_t logger, ncclProfilerCallback_t) { return netInit(logger); }

ncclResult_t getProperties(int dev, ncclNetProperties_v10_t* props) { return fillProps(dev, props); }

ncclResult_t listen(int dev, void* handle, void** listenComm) { return netListen(CommConfig{}, dev, handle, listenComm); }

ncclResult_t connect(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm,
                     ncclNetDeviceHandle_v10_t** devComm) {
  CommConfig c;
  c.trafficClass = config ? config->trafficClass : -1;
  return netConnect(c, dev, handle, sendComm, devComm);
}

ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v10_t** devComm) {
  return netAccept(listenComm, recvComm, devComm);
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
  return netIsend(sendComm, data, size, tag, mhandle, request);
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                   void** request) {
  return netIrecv(recvComm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t makeVDevice(int* d, ncclNetVDeviceProps_v10_t* props) {
  if (!props) return ncclInvalidArgument;
  return netMakeVDevice(d, props->ndevs, props->devs);
}

}  // namespace
}  // namespace icn::adapters

using namespace icn::adapters;
ICN_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    "ICN",     init,     netDevices,     getProperties, listen,       connect,        accept,
    netRegMr,  netRegMrDmaBuf, netDeregMr, isend,       irecv,        netIflush,      netTest,
    netCloseSend, netCloseRecv, netCloseListen, netGetDeviceMr, netIrecvConsumed, makeVDevice,
};
