#include "transport/ucx/ucx_reaper.h"

#include "core/log.h"
#include "transport/ucx/ucx_context.h"

namespace icn::ucx {

void Reaper::adopt(std::unique_ptr<Worker> worker, std::unique_ptr<Endpoint> ep) {
  Entry e;
  e.flush = ep ? ep->startFlush() : nullptr;
  e.worker = std::move(worker);
  e.ep = std::move(ep);
  e.deadline = std::chrono::steady_clock::now() + kCloseDeadline;
  std::lock_guard lk(mu_);
  incoming_.push_back(std::move(e));
  unfinished_++;
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  cv_.notify_one();
}

size_t Reaper::pending() {
  std::lock_guard lk(mu_);
  return unfinished_;
}

void Reaper::drain() {
  std::unique_lock lk(mu_);
  drained_.wait_for(lk, kCloseDeadline + std::chrono::milliseconds(100), [&] { return unfinished_ == 0; });
}

namespace {
// True once the request is no longer running (or the deadline passed: then it is cancelled); frees it.
bool settle(Worker& w, ucs_status_ptr_t& r, bool pastDeadline) {
  if (!r) return true;
  if (UCS_PTR_IS_ERR(r)) {
    r = nullptr;
    return true;
  }
  if (ucp_request_check_status(r) == UCS_INPROGRESS) {
    if (!pastDeadline) return false;
    ucp_request_cancel(w.get(), r);
    w.progress();
    ICN_TRACE(subsys::Net, "closing a UCX endpoint: not finished within %lld ms, cancelled",
              static_cast<long long>(Reaper::kCloseDeadline.count()));
  }
  ucp_request_free(r);
  r = nullptr;
  return true;
}
}  // namespace

bool Reaper::advance(Entry& e, std::chrono::steady_clock::time_point now) {
  e.worker->progress();
  bool late = now >= e.deadline;
  if (!settle(*e.worker, e.flush, late)) return false;
  if (e.ep) {
    e.close = e.ep->forceClose();
    e.worker->progress();
  }
  if (!settle(*e.worker, e.close, late)) return false;
  e.ep.reset();  // before its worker
  e.worker.reset();
  return true;
}

void Reaper::run() {
  std::vector<Entry> active;
  std::unique_lock lk(mu_);
  for (;;) {
    if (active.empty() && incoming_.empty()) {
      if (stop_) return;
      cv_.wait(lk, [&] { return stop_ || !incoming_.empty(); });
      continue;
    }
    for (auto& e : incoming_) active.push_back(std::move(e));
    incoming_.clear();
    bool stopping = stop_;
    auto stopAt = stopDeadline_;
    lk.unlock();
    auto now = std::chrono::steady_clock::now();
    size_t finished = 0;
    for (size_t i = 0; i < active.size();) {
      if (stopping && now >= stopAt) active[i].deadline = now;
      if (advance(active[i], now)) {
        active[i] = std::move(active.back());
        active.pop_back();
        finished++;
      } else {
        i++;
      }
    }
    // A flush finishes within a few round trips when the peer is alive: poll closely at first (workers
    // kept alive longer pile up memory), then gently for a stalled peer rather than spin a core.
    bool young = false;
    for (auto& e : active) young = young || now < e.deadline - kCloseDeadline + kEagerPoll;
    if (young)
      std::this_thread::yield();
    else if (!active.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lk.lock();
    unfinished_ -= finished;
    if (unfinished_ == 0) drained_.notify_all();
  }
}

Reaper::~Reaper() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    stopDeadline_ = std::chrono::steady_clock::now() + kShutdownGrace;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  auto now = std::chrono::steady_clock::now();
  for (auto& e : incoming_) {  // adopted after the thread had exited
    e.deadline = now;
    advance(e, now);
  }
  incoming_.clear();
}

}  // namespace icn::ucx
