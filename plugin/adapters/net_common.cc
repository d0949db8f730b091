#include "adapters/net_common.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <new>
#include <string_view>

#include "adapters/nccl_channels.h"
#include "adapters/transport_select.h"
#include "core/auth.h"
#include "core/log.h"
#include "core/params.h"

namespace icn::adapters {
namespace {

struct NetState {
  std::mutex mu;
  bool initialised = false;
  ncclResult_t initResult = ncclSuccess;
  std::unique_ptr<Transport> transport;
  std::deque<DeviceProps> props;  // deque: pointers into it stay valid as vdevs are appended
};

NetState& state() {
  static NetState s;
  return s;
}

Transport* transport() { return state().transport.get(); }

#define ICN_ARG_CHECK(cond, ...)                           \
  do {                                                     \
    if (!(cond)) {                                         \
      ICN_WARN(::icn::subsys::Net, __VA_ARGS__);           \
      return ncclInvalidArgument;                          \
    }                                                      \
  } while (0)

#define ICN_NEED_INIT()                                                         \
  do {                                                                          \
    if (!transport()) {                                                         \
      ICN_WARN(::icn::subsys::Net, "%s called before a successful init", __func__); \
      return ncclInvalidUsage;                                                  \
    }                                                                           \
  } while (0)

// NCCL hands every comm back as void*; we always give it the Comm* base of a SendComm/RecvComm.
Comm* asComm(void* p) { return static_cast<Comm*>(p); }
SendComm* asSend(void* p) { return static_cast<SendComm*>(asComm(p)); }
RecvComm* asRecv(void* p) { return static_cast<RecvComm*>(asComm(p)); }

}  // namespace

// The core's numbers are NCCL's, so the adapters pass them through without a table: result codes (toNccl),
// memory kinds (regMr's type, ptrSupport), the handle span, request and grouping limits, log levels and subsystems.
static_assert(static_cast<int>(Status::Ok) == ncclSuccess);
static_assert(static_cast<int>(Status::SystemError) == ncclSystemError);
static_assert(static_cast<int>(Status::InternalError) == ncclInternalError);
static_assert(static_cast<int>(Status::InvalidArgument) == ncclInvalidArgument);
static_assert(static_cast<int>(Status::InvalidUsage) == ncclInvalidUsage);
static_assert(static_cast<int>(Status::RemoteError) == ncclRemoteError);
static_assert(kMemHost == NCCL_PTR_HOST && kMemCuda == NCCL_PTR_CUDA && kMemDmabuf == NCCL_PTR_DMABUF);
static_assert(kHandleSize == NCCL_NET_HANDLE_MAXSIZE);
static_assert(kMaxRequests == NCCL_NET_MAX_REQUESTS);
static_assert(kMaxVDevMembers == NCCL_NET_MAX_DEVS_PER_NIC);
static_assert(static_cast<int>(LogLevel::Warn) == NCCL_LOG_WARN && static_cast<int>(LogLevel::Info) == NCCL_LOG_INFO &&
              static_cast<int>(LogLevel::Trace) == NCCL_LOG_TRACE);
static_assert(subsys::Init == NCCL_INIT && subsys::Net == NCCL_NET && subsys::Graph == NCCL_GRAPH &&
              subsys::Tuning == NCCL_TUNING && subsys::Env == NCCL_ENV && subsys::Profile == NCCL_PROFILE);

ncclResult_t toNccl(Status s) { return static_cast<ncclResult_t>(static_cast<int>(s)); }

ncclResult_t netInit(ncclDebugLogger_t logger) {
  setLogSink(reinterpret_cast<LogSink>(logger));
  NetState& s = state();
  std::lock_guard lk(s.mu);
  if (s.initialised) return s.initResult;
  s.initialised = true;
  params::logOnce();
  // An unusable job key is reported now but fails listen/connect, not init: a failed init would make NCCL fall
  // back to its own transports, i.e. run the job without the authentication it asked for.
  (void)auth::init();
  Status st = selectTransport(&s.transport);
  if (st != Status::Ok) return s.initResult = toNccl(st);
  for (int d = 0; d < s.transport->deviceCount(); d++) {
    DeviceProps p;
    if (s.transport->getProperties(d, &p) != Status::Ok) return s.initResult = ncclInternalError;
    s.props.push_back(std::move(p));
  }
  const auto widest = std::max_element(s.props.begin(), s.props.end(),
                                       [](const DeviceProps& a, const DeviceProps& b) { return a.rails < b.rails; });
  if (widest != s.props.end()) askNcclForChannels(widest->rails, widest->name);
  return s.initResult = ncclSuccess;
}

void netQuiesce() {
  if (Transport* t = transport()) t->quiesce();
}

ncclResult_t netDevices(int* ndev) {
  ICN_ARG_CHECK(ndev, "devices: null output pointer");
  ICN_NEED_INIT();
  std::lock_guard lk(state().mu);
  *ndev = static_cast<int>(state().props.size());
  return ncclSuccess;
}

ncclResult_t netProps(int dev, const DeviceProps** out) {
  ICN_NEED_INIT();
  std::lock_guard lk(state().mu);
  ICN_ARG_CHECK(dev >= 0 && dev < static_cast<int>(state().props.size()), "getProperties: no device %d (have %zu)", dev,
                state().props.size());
  *out = &state().props[static_cast<size_t>(dev)];
  return ncclSuccess;
}

ncclResult_t netListen(const CommConfig& cfg, int dev, void* handle, void** listenComm) {
  ICN_NEED_INIT();
  ICN_ARG_CHECK(handle && listenComm, "listen: null handle or output pointer");
  std::unique_ptr<ListenComm> l;
  Status st = transport()->listen(dev, cfg, HandleBytes(static_cast<uint8_t*>(handle), kHandleSize), &l);
  if (st != Status::Ok) return toNccl(st);
  *listenComm = l.release();
  return ncclSuccess;
}

ncclResult_t netConnect(const CommConfig& cfg, int dev, void* handle, void** sendComm, void* devHandleSlot) {
  ICN_NEED_INIT();
  ICN_ARG_CHECK(handle && sendComm, "connect: null handle or output pointer");
  *sendComm = nullptr;
  std::unique_ptr<SendComm> c;
  Status st = transport()->connect(dev, cfg, HandleBytes(static_cast<uint8_t*>(handle), kHandleSize), &c);
  if (st != Status::Ok) return toNccl(st);
  if (c) *sendComm = static_cast<Comm*>(c.release());
  return ncclSuccess;
}

ncclResult_t netAccept(void* listenComm, void** recvComm, void* devHandleSlot) {
  ICN_ARG_CHECK(listenComm && recvComm, "accept: null listen comm or output pointer");
  *recvComm = nullptr;
  std::unique_ptr<RecvComm> c;
  Status st = static_cast<ListenComm*>(listenComm)->accept(&c);
  if (st != Status::Ok) return toNccl(st);
  if (c) *recvComm = static_cast<Comm*>(c.release());
  return ncclSuccess;
}

ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  ICN_ARG_CHECK(comm && mhandle, "regMr: null comm or output pointer");
  return toNccl(asComm(comm)->regMr(data, size, type, mhandle));
}

ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  ICN_ARG_CHECK(comm && mhandle, "regMrDmaBuf: null comm or output pointer");
  return toNccl(asComm(comm)->regMrDmaBuf(data, size, type, offset, fd, mhandle));
}

ncclResult_t netDeregMr(void* comm, void* mhandle) {
  ICN_ARG_CHECK(comm, "deregMr: null comm");
  if (!mhandle) return ncclSuccess;
  return toNccl(asComm(comm)->deregMr(mhandle));
}

ncclResult_t netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  ICN_ARG_CHECK(sendComm && request, "isend: null comm or request pointer");
  Request* r = nullptr;
  Status st = asSend(sendComm)->isend(data, size, tag, mhandle, &r);
  *request = r;
  return toNccl(st);
}

ncclResult_t netIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  ICN_ARG_CHECK(recvComm && request, "irecv: null comm or request pointer");
  Request* r = nullptr;  // *request may arrive preset to 0x1 (optional completion): we always complete
  Status st = asRecv(recvComm)->irecv(n, data, sizes, tags, mhandles, &r);
  *request = r;
  return toNccl(st);
}

ncclResult_t netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  ICN_ARG_CHECK(recvComm && request, "iflush: null comm or request pointer");
  Request* r = nullptr;
  Status st = asRecv(recvComm)->iflush(n, data, sizes, mhandles, &r);
  *request = r;
  return toNccl(st);
}

ncclResult_t netTest(void* request, int* done, int* sizes) {
  ICN_ARG_CHECK(request && done, "test: null request or done pointer");
  bool d = false;
  Status st = static_cast<Request*>(request)->test(&d, sizes);
  *done = d ? 1 : 0;
  return toNccl(st);
}

ncclResult_t netCloseSend(void* sendComm) {
  std::unique_ptr<SendComm> c(sendComm ? asSend(sendComm) : nullptr);
  return ncclSuccess;
}

ncclResult_t netCloseRecv(void* recvComm) {
  std::unique_ptr<RecvComm> c(recvComm ? asRecv(recvComm) : nullptr);
  return ncclSuccess;
}

ncclResult_t netCloseListen(void* listenComm) {
  std::unique_ptr<ListenComm> c(static_cast<ListenComm*>(listenComm));
  return ncclSuccess;
}

ncclResult_t netGetDeviceMr(void*, void*, void** dptr) {
  if (dptr) *dptr = nullptr;  // host-side plugin: no device handles
  return ncclSuccess;
}

ncclResult_t netIrecvConsumed(void*, int, void*) { return ncclSuccess; }

ncclResult_t netMakeVDevice(int* d, int ndevs, const int* devs) {
  ICN_NEED_INIT();
  ICN_ARG_CHECK(d && devs && ndevs >= 1, "makeVDevice: bad arguments (%d devices)", ndevs);
  if (ndevs > kMaxVDevMembers) {
    // Net v12 lets NCCL ask for up to 8; NCCL treats a refusal as "do not merge these" and places them apart.
    ICN_INFO(subsys::Net | subsys::Init, "makeVDevice: %d devices asked, at most %d fuse into one", ndevs,
             kMaxVDevMembers);
    return ncclInvalidUsage;
  }
  NetState& s = state();
  std::lock_guard lk(s.mu);
  int newDev = -1;
  Status st = s.transport->makeVDevice(std::span<const int>(devs, static_cast<size_t>(ndevs)), &newDev);
  if (st != Status::Ok) {
    ICN_WARN(subsys::Net, "makeVDevice: transport %s cannot fuse %d devices", s.transport->name(), ndevs);
    return toNccl(st);
  }
  DeviceProps p;
  if (s.transport->getProperties(newDev, &p) != Status::Ok) return ncclInternalError;
  s.props.push_back(std::move(p));
  *d = newDev;
  return ncclSuccess;
}

namespace {
struct NetContext {
  CommConfig config;
};
}  // namespace

ncclResult_t netCtxInit(void** ctx, uint64_t commId, int trafficClass, ncclDebugLogger_t logger) {
  if (!ctx) return ncclInvalidArgument;
  *ctx = nullptr;
  ncclResult_t r = netInit(logger);
  if (r != ncclSuccess) return r;
  auto* c = new (std::nothrow) NetContext;
  if (!c) return ncclSystemError;
  c->config.commId = commId;
  c->config.trafficClass = trafficClass;
  *ctx = c;
  return ncclSuccess;
}

CommConfig netCtxConfig(void* ctx) { return ctx ? static_cast<NetContext*>(ctx)->config : CommConfig{}; }

ncclResult_t netCtxFinalize(void* ctx) {
  delete static_cast<NetContext*>(ctx);
  netQuiesce();
  return ncclSuccess;
}

ncclResult_t netNoteAttr(uint32_t op, uint32_t algo, uint32_t proto) {
  ICN_TRACE(subsys::Net, "setNetAttr: op 0x%x algo 0x%x proto 0x%x (hints noted, no effect on this transport)", op,
            algo, proto);
  return ncclSuccess;
}

int16_t netRailId(int dev) {
  const DeviceProps* p = nullptr;
  if (netProps(dev, &p) != ncclSuccess || !p) return -1;
  Transport* t = transport();
  if (!t) return -1;
  if (std::string_view(t->name()) != "ib") return 0;
  if (p->members.size() != 1 || p->members[0] < 0 || p->members[0] > INT16_MAX) return -1;
  return static_cast<int16_t>(p->members[0]);
}

}  // namespace icn::adapters
