// Memory-registration cache of one protection domain: page-aligned ranges, reference counted, so the many
// regMr calls NCCL makes for the same buffers (one per comm/channel) register once. The backend does the real
// ibv_reg_mr / ibv_reg_dmabuf_mr; tests plug in a fake one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace icn::ib {

struct MrRequest {
  uintptr_t addr = 0;     // page-aligned start
  size_t length = 0;      // page-aligned length
  int memType = 1;        // icn::MemType
  int dmabufFd = -1;      // >= 0: register through dma-buf
  uint64_t dmabufOffset = 0;  // offset of addr inside the dma-buf
};

struct MrEntry {
  uintptr_t start = 0, end = 0;
  int memType = 1;
  void* mr = nullptr;  // ibv_mr* (opaque here)
  uint32_t lkey = 0, rkey = 0;
  int refs = 0;
};

class MrCache {
 public:
  using RegFn = std::function<Status(const MrRequest&, void** mr, uint32_t* lkey, uint32_t* rkey, std::string* why)>;
  using DeregFn = std::function<void(void* mr)>;

  MrCache(RegFn reg, DeregFn dereg, size_t pageSize = 4096)
      : reg_(std::move(reg)), dereg_(std::move(dereg)), page_(pageSize) {}
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // Returns an entry covering [addr, addr+size) for memType; the pointer stays valid until release().
  Status acquire(const void* addr, size_t size, int memType, int dmabufFd, uint64_t dmabufOffset,
                 MrEntry** out, std::string* why);
  void release(MrEntry* e);
  size_t size() const;  // number of live registrations

 private:
  RegFn reg_;
  DeregFn dereg_;
  size_t page_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<MrEntry>> entries_;
};

}  // namespace icn::ib
