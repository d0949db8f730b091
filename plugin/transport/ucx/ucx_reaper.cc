#include "transport/ucx/ucx_reaper.h"

#include <thread>

#include "core/log.h"
#include "transport/ucx/ucx_context.h"

namespace icn::ucx {
namespace {
// True once the request is no longer running (or the deadline passed: then it is cancelled); frees it.
bool settle(Worker& w, ucs_status_ptr_t& r, bool pastDeadline) {
  if (!r) return true;
  if (UCS_PTR_IS_ERR(r)) {
    r = nullptr;
    return true;
  }
  if (ucx().request_check_status(r) == UCS_INPROGRESS) {
    if (!pastDeadline) return false;
    ucx().request_cancel(w.get(), r);
    w.progress();
    ICN_TRACE(subsys::Net, "closing a UCX endpoint: not finished within %lld ms, cancelled",
              static_cast<long long>(Reaper::kCloseDeadline.count()));
  }
  ucx().request_free(r);
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

void Reaper::adopt(std::unique_ptr<Worker> worker, std::unique_ptr<Endpoint> ep) {
  Entry e;
  e.flush = ep ? ep->startFlush() : nullptr;
  e.worker = std::move(worker);
  e.ep = std::move(ep);
  e.deadline = std::chrono::steady_clock::now() + kCloseDeadline;
  {
    std::lock_guard lk(mu_);
    entries_.push_back(std::move(e));
    pending_.store(entries_.size(), std::memory_order_relaxed);
  }
  pass(false);
}

void Reaper::pass(bool wait) {
  std::unique_lock lk(mu_, std::defer_lock);
  if (wait)
    lk.lock();
  else if (!lk.try_lock())
    return;  // another thread is advancing them
  auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < entries_.size();) {
    if (advance(entries_[i], now)) {
      entries_[i] = std::move(entries_.back());
      entries_.pop_back();
    } else {
      i++;
    }
  }
  pending_.store(entries_.size(), std::memory_order_relaxed);
}

void Reaper::drain() {
  auto until = std::chrono::steady_clock::now() + kCloseDeadline + std::chrono::milliseconds(100);
  while (pending() != 0 && std::chrono::steady_clock::now() < until) {
    pass(true);
    if (pending() != 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

Reaper::~Reaper() {
  drain();
  std::lock_guard lk(mu_);
  auto now = std::chrono::steady_clock::now();
  for (auto& e : entries_) {
    e.deadline = now;
    advance(e, now);
  }
  entries_.clear();
}

}  // namespace icn::ucx
