#include "transport/ib/ib_mr_cache.h"

#include <algorithm>

namespace icn::ib {

MrCache::~MrCache() {
  for (auto& e : entries_) dereg_(e->mr);
}

Status MrCache::acquire(const void* addr, size_t size, int memType, int dmabufFd, uint64_t dmabufOffset,
                        MrEntry** out, std::string* why) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (size == 0) size = 1;  // NCCL may register empty buffers; still needs a valid key
  if (a + size < a) {
    if (why) *why = "address range wraps around";
    return Status::InvalidArgument;
  }
  const uintptr_t start = a & ~(uintptr_t(page_) - 1);
  const uintptr_t end = (a + size + page_ - 1) & ~(uintptr_t(page_) - 1);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& e : entries_) {
    if (e->memType == memType && e->start <= start && end <= e->end) {
      ++e->refs;
      *out = e.get();
      return Status::Ok;
    }
  }
  MrRequest req;
  req.addr = start;
  req.length = end - start;
  req.memType = memType;
  req.dmabufFd = dmabufFd;
  if (dmabufFd >= 0) {
    // The dma-buf offset must move with the aligned start; when it cannot, register the exact range.
    if (dmabufOffset >= a - start) {
      req.dmabufOffset = dmabufOffset - (a - start);
    } else {
      req.addr = a;
      req.length = size;
      req.dmabufOffset = dmabufOffset;
    }
  }
  auto e = std::make_unique<MrEntry>();
  e->start = req.addr;
  e->end = req.addr + req.length;
  e->memType = memType;
  Status st = reg_(req, &e->mr, &e->lkey, &e->rkey, why);
  if (st != Status::Ok) return st;
  e->refs = 1;
  *out = e.get();
  entries_.push_back(std::move(e));
  return Status::Ok;
}

void MrCache::release(MrEntry* entry) {
  if (!entry) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.get() == entry; });
  if (it == entries_.end()) return;
  if (--(*it)->refs > 0) return;
  dereg_((*it)->mr);
  entries_.erase(it);
}

size_t MrCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace icn::ib
