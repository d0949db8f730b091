// Version-independent half of the net adapters: the process-wide transport and the C-ABI shims that
// every ncclNet_vN_t table points at. Only this folder converts between NCCL and core types.
#pragma once
#include <algorithm>
#include <iterator>

#include "abi/net_v11.h"
#include "core/status.h"
#include "core/transport.h"

namespace icn::adapters {

ncclResult_t toNccl(Status s);

// Process-wide: installs the logger, logs the settings, picks the transport (once).
ncclResult_t netInit(ncclDebugLogger_t logger);
// NCCL is done with the plugin (finalize): connections closed earlier finish delivering first.
void netQuiesce();
ncclResult_t netDevices(int* ndev);
// Stable for the life of the process (NCCL keeps the name/pciPath pointers).
ncclResult_t netProps(int dev, const DeviceProps** out);

ncclResult_t netListen(const CommConfig& cfg, int dev, void* handle, void** listenComm);
ncclResult_t netConnect(const CommConfig& cfg, int dev, void* handle, void** sendComm, void* devHandleSlot);
ncclResult_t netAccept(void* listenComm, void** recvComm, void* devHandleSlot);
ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
ncclResult_t netDeregMr(void* comm, void* mhandle);
ncclResult_t netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t netIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
ncclResult_t netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
ncclResult_t netTest(void* request, int* done, int* sizes);
ncclResult_t netCloseSend(void* sendComm);
ncclResult_t netCloseRecv(void* recvComm);
ncclResult_t netCloseListen(void* listenComm);
ncclResult_t netGetDeviceMr(void* comm, void* mhandle, void** dptr);
ncclResult_t netIrecvConsumed(void* recvComm, int n, void* request);
ncclResult_t netMakeVDevice(int* d, int ndevs, const int* devs);

// Per-communicator context of the net APIs with init(ctx, commId, config) (v11, v12): carries commId and the
// communicator's traffic class. finalize accepts NULL (NCCL finalizes even after a failed init).
ncclResult_t netCtxInit(void** ctx, uint64_t commId, int trafficClass, ncclDebugLogger_t logger);
CommConfig netCtxConfig(void* ctx);
ncclResult_t netCtxFinalize(void* ctx);
// setNetAttr hints (v11, v12): traced, no effect on our transports.
ncclResult_t netNoteAttr(uint32_t op, uint32_t algo, uint32_t proto);

// Rail id for net v12 properties. UCX devices all reach each other over routed IP: one rail, 0. An RDMA port is
// its own rail, numbered by its physical device index, so NCCL pairs NIC i with NIC i on every node as it does
// for NICs it cannot tell apart otherwise; a fused device spans rails and reports -1 (undefined). Planes are
// never known to us: -1.
int16_t netRailId(int dev);

// Fills the fields common to properties v9..v11 (identical layout up to maxCollBytes).
template <typename Props>
ncclResult_t fillProps(int dev, Props* props) {
  if (!props) return ncclInvalidArgument;
  const DeviceProps* p = nullptr;
  ncclResult_t r = netProps(dev, &p);
  if (r != ncclSuccess) return r;
  props->name = const_cast<char*>(p->name.c_str());
  props->pciPath = p->pciPath.empty() ? nullptr : const_cast<char*>(p->pciPath.c_str());
  props->guid = p->guid;
  props->ptrSupport = p->ptrSupport;
  props->regIsGlobal = p->regIsGlobal;
  props->forceFlush = p->forceFlush;
  props->speed = p->speedMbps;
  props->port = p->port;
  props->latency = p->latencyUs;
  props->maxComms = p->maxComms;
  props->maxRecvs = p->maxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = 0;
  constexpr size_t kSlots = std::size(decltype(props->vProps.devs){});
  props->vProps.ndevs = static_cast<int>(std::min(p->members.size(), kSlots));
  for (size_t i = 0; i < p->members.size() && i < kSlots; i++) props->vProps.devs[i] = p->members[i];
  props->maxP2pBytes = p->maxP2pBytes;
  props->maxCollBytes = p->maxCollBytes;
  return ncclSuccess;
}

}  // namespace icn::adapters
