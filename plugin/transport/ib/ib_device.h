// Opened RDMA devices. An Hca is one ibv_context + protection domain + MR cache + async-event thread, shared by
// its ports and by every comm on it; a Port is what NCCL sees as one physical net device.
#pragma once
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/transport.h"
#include "transport/ib/ib_gdr.h"
#include "transport/ib/ib_mr_cache.h"
#include "transport/ib/ib_sysfs.h"
#include "transport/ib/ib_verbs.h"

namespace icn::ib {

// Where the async thread reports a fatal event on a QP: a comm stores one of these in qp->qp_context.
struct QpFaultSink {
  std::atomic<int> event{-1};  // ibv_event_type of the first fatal event, -1: none
};

class Hca {
 public:
  static Status open(ibv_device* dev, const HcaInfo& info, std::shared_ptr<Hca>* out, std::string* why);
  ~Hca();
  Hca(const Hca&) = delete;
  Hca& operator=(const Hca&) = delete;

  const std::string& name() const { return info_.name; }
  const HcaInfo& info() const { return info_; }
  ibv_context* ctx() const { return ctx_.get(); }
  ibv_pd* pd() const { return pd_.get(); }
  const ibv_device_attr& attr() const { return attr_; }
  MrCache& mrCache() { return *mrCache_; }
  int accessFlags() const { return access_; }

  // GDR for this device (decided at transport creation, after the dma-buf probe).
  GdrDecision gdr;
  // Probes ibv_reg_dmabuf_mr with an invalid fd: EBADF means the kernel path exists.
  void probeDmabuf(GdrProbe* p) const;

  // Fault state written by the async thread. Empty string: healthy.
  bool fatal() const { return fatal_.load(std::memory_order_relaxed); }
  bool portDown(int port) const { return port > 0 && port < 8 && portDown_[port].load(std::memory_order_relaxed); }
  std::string faultWhy() const;

 private:
  Hca() = default;
  void asyncLoop();
  void onEvent(const ibv_async_event& ev);

  HcaInfo info_;
  ContextPtr ctx_;
  PdPtr pd_;
  ibv_device_attr attr_{};
  int access_ = 0;
  std::unique_ptr<MrCache> mrCache_;
  std::atomic<bool> fatal_{false};
  std::array<std::atomic<bool>, 8> portDown_{};
  mutable std::mutex faultMu_;
  std::string faultWhy_;
  int wakeFd_ = -1;
  std::thread thread_;
};

struct Port {
  std::shared_ptr<Hca> hca;
  int port = 1;
  int gidIndex = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
  bool ethernet = false;
  ibv_mtu mtu = IBV_MTU_1024;
  DeviceProps props;
  // Fails fast with a message when the device or port hit a fatal async event.
  Status healthy(std::string* why) const;
};

// Speed in Mbps from verbs' active_width x active_speed (used when sysfs has no rate).
int verbsSpeedMbps(uint8_t activeWidth, uint32_t activeSpeed);

}  // namespace icn::ib
