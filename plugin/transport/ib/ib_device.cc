#include "transport/ib/ib_device.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "core/log.h"
#include "core/params.h"
#include "transport/ib/ib_qp.h"

namespace icn::ib {

int verbsSpeedMbps(uint8_t activeWidth, uint32_t activeSpeed) {
  int lanes = 1;
  switch (activeWidth) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: lanes = 1;
  }
  int lane = 0;
  switch (activeSpeed) {
    case 1: lane = 2500; break;
    case 2: lane = 5000; break;
    case 4: case 8: lane = 10000; break;
    case 16: lane = 14000; break;
    case 32: lane = 25000; break;
    case 64: lane = 50000; break;
    case 128: lane = 100000; break;
    case 256: lane = 200000; break;
    default: lane = 10000;
  }
  return lanes * lane;
}

Status Hca::open(ibv_device* dev, const HcaInfo& info, std::shared_ptr<Hca>* out, std::string* why) {
  std::shared_ptr<Hca> h(new Hca());
  h->info_ = info;
  h->ctx_.reset(verbs().open_device(dev));
  if (!h->ctx_) {
    *why = "verbs init failed: ibv_open_device(" + info.name + "): " + errnoString(errno);
    return Status::SystemError;
  }
  if (verbs().query_device(h->ctx_.get(), &h->attr_) != 0) {
    *why = "verbs init failed: ibv_query_device(" + info.name + "): " + errnoString(errno);
    return Status::SystemError;
  }
  h->pd_.reset(verbs().alloc_pd(h->ctx_.get()));
  if (!h->pd_) {
    *why = "verbs init failed: ibv_alloc_pd(" + info.name + "): " + errnoString(errno);
    return Status::SystemError;
  }
  h->access_ = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  // Relaxed ordering is an optional access flag: providers that lack it ignore it (no failure).
  if (params::getBool(params::Id::IbRelaxedOrdering)) h->access_ |= IBV_ACCESS_RELAXED_ORDERING;
  ibv_pd* pd = h->pd_.get();
  const int access = h->access_;
  const std::string name = info.name;
  h->mrCache_ = std::make_unique<MrCache>(
      [pd, access, name](const MrRequest& r, void** mr, uint32_t* lkey, uint32_t* rkey, std::string* why) {
        ibv_mr* m = r.dmabufFd >= 0
                        ? verbsRegDmabufMr(pd, r.dmabufOffset, r.length, r.addr, r.dmabufFd,
                                            mrAccessFlags(access, r.memType))
                        : verbsRegMr(pd, reinterpret_cast<void*>(r.addr), r.length, mrAccessFlags(access, r.memType));
        if (!m) {
          int e = errno;
          if (why) {
            *why = std::string(r.dmabufFd >= 0 ? "ibv_reg_dmabuf_mr" : "ibv_reg_mr") + " on " + name + " (" +
                   std::to_string(r.length) + " bytes, " + (r.memType == kMemCuda ? "CUDA" : "host") +
                   " memory): " + errnoString(e);
            if (r.memType == kMemCuda && r.dmabufFd < 0) *why += "; GPU memory without dma-buf needs nvidia_peermem";
          }
          return Status::SystemError;
        }
        *mr = m;
        *lkey = m->lkey;
        *rkey = m->rkey;
        return Status::Ok;
      },
      [](void* mr) { verbs().dereg_mr(static_cast<ibv_mr*>(mr)); });

  // The async fd is polled with a timeout together with an eventfd that the destructor signals.
  int fl = fcntl(h->ctx_->async_fd, F_GETFL);
  if (fl < 0 || fcntl(h->ctx_->async_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    *why = "verbs init failed: cannot make the async event fd non-blocking: " + errnoString(errno);
    return Status::SystemError;
  }
  h->wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (h->wakeFd_ < 0) {
    *why = "eventfd: " + errnoString(errno);
    return Status::SystemError;
  }
  Hca* raw = h.get();
  h->thread_ = std::thread([raw] { raw->asyncLoop(); });
  *out = std::move(h);
  return Status::Ok;
}

Hca::~Hca() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    if (write(wakeFd_, &one, sizeof one) < 0) { /* the loop also wakes every second */ }
    thread_.join();
  }
  if (wakeFd_ >= 0) close(wakeFd_);
  mrCache_.reset();  // deregister before the PD goes
}

void Hca::asyncLoop() {
  pollfd fds[2] = {{ctx_->async_fd, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
  for (;;) {
    int r = poll(fds, 2, 1000);
    if (r < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    ibv_async_event ev;
    while (verbs().get_async_event(ctx_.get(), &ev) == 0) {
      onEvent(ev);
      verbs().ack_async_event(&ev);
    }
  }
}

void Hca::onEvent(const ibv_async_event& ev) {
  const char* what = verbs().event_type_str(ev.event_type);
  switch (ev.event_type) {
    case IBV_EVENT_DEVICE_FATAL: {
      fatal_ = true;
      std::lock_guard<std::mutex> l(faultMu_);
      faultWhy_ = "device " + info_.name + " reported a fatal error (" + what + ")";
      ICN_WARN(subsys::Net, "%s: every connection on it fails from now on", faultWhy_.c_str());
      break;
    }
    case IBV_EVENT_PORT_ERR:
      if (ev.element.port_num < 8) portDown_[ev.element.port_num] = true;
      ICN_WARN(subsys::Net, "%s port %d: %s (link down)", info_.name.c_str(), ev.element.port_num, what);
      break;
    case IBV_EVENT_PORT_ACTIVE:
      if (ev.element.port_num < 8) portDown_[ev.element.port_num] = false;
      ICN_INFO(subsys::Net, "%s port %d: %s", info_.name.c_str(), ev.element.port_num, what);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR: {
      ibv_qp* qp = ev.element.qp;
      if (auto* sink = static_cast<QpFaultSink*>(qp->qp_context)) {
        int expected = -1;
        sink->event.compare_exchange_strong(expected, int(ev.event_type));
      }
      ICN_WARN(subsys::Net, "%s: QP %u: %s", info_.name.c_str(), qp->qp_num, what);
      break;
    }
    case IBV_EVENT_CQ_ERR:
      ICN_WARN(subsys::Net, "%s: completion queue overrun/error: %s", info_.name.c_str(), what);
      break;
    default:
      ICN_TRACE(subsys::Net, "%s: async event %s", info_.name.c_str(), what);
  }
}

std::string Hca::faultWhy() const {
  std::lock_guard<std::mutex> l(faultMu_);
  return faultWhy_;
}

void Hca::probeDmabuf(GdrProbe* p) const {
  errno = 0;
  ibv_mr* mr = verbsRegDmabufMr(pd_.get(), 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
  int e = errno;
  if (mr) {  // cannot happen with fd -1, but never leak
    verbs().dereg_mr(mr);
    p->verbsDmabuf = true;
    return;
  }
  // EBADF: the kernel looked up the fd, so dma-buf registration is implemented for this device.
  p->verbsDmabuf = (e == EBADF);
  p->verbsDmabufNote = "ibv_reg_dmabuf_mr on " + info_.name + ": " + (e ? strerror(e) : "unsupported");
}

Status Port::healthy(std::string* why) const {
  if (hca->fatal()) {
    *why = hca->faultWhy();
    return Status::SystemError;
  }
  if (hca->portDown(port)) {
    *why = hca->name() + " port " + std::to_string(port) + " is down";
    return Status::SystemError;
  }
  return Status::Ok;
}

}  // namespace icn::ib
