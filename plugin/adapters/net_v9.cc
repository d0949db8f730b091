// ncclNet_v9_t: NCCL 2.24/2.25. No profiler handles, no per-connect config.
#include "abi/export.h"
#include "abi/net_v9.h"
#include "adapters/net_common.h"

namespace icn::adapters {
namespace {

ncclResult_t init(ncclDebugLogger_t logger) { return netInit(logger); }

ncclResult_t getProperties(int dev, ncclNetProperties_v9_t* props) { return fillProps(dev, props); }

ncclResult_t listen(int dev, void* handle, void** listenComm) { return netListen(CommConfig{}, dev, handle, listenComm); }

ncclResult_t connect(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v9_t** devComm) {
  return netConnect(CommConfig{}, dev, handle, sendComm, devComm);
}

ncclResult_t accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v9_t** devComm) {
  return netAccept(listenComm, recvComm, devComm);
}

ncclResult_t makeVDevice(int* d, ncclNetVDeviceProps_v9_t* props) {
  if (!props) return ncclInvalidArgument;
  return netMakeVDevice(d, props->ndevs, props->devs);
}

}  // namespace
}  // namespace icn::adapters

using namespace icn::adapters;
ICN_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    "ICN",     init,     netDevices,     getProperties, listen,    connect,   accept,
    netRegMr,  netRegMrDmaBuf, netDeregMr, netIsend,    netIrecv,  netIflush, netTest,
    netCloseSend, netCloseRecv, netCloseListen, netGetDeviceMr, netIrecvConsumed, makeVDevice,
};
