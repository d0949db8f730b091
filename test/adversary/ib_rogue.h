// A hostile peer of ICN's ib transport, written against raw libibverbs: it completes the handshake as a sender
// (its blob names one RC QP and a CTS FIFO that the victim writes into), connects its QP to the victim's, reads
// the victim's clear-to-send entry (the receive's address, rkey, size, tag and sequence) and then posts any work
// request it likes: RDMA writes with or without an immediate of any length and any address, RDMA reads, sends.
// The NIC enforces the rkey's bounds and access rights; the victim has to enforce everything else.
#pragma once
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/socket.h"
#include "hostile_peer.h"

namespace icn::adversary {

class IbRogue {
 public:
  // `dev`: the verbs device to use (GID index 0).
  static std::unique_ptr<IbRogue> connect(const SockAddr& to, uint64_t commId, const std::string& dev, Ms limit,
                                          std::string* why);
  ~IbRogue();
  IbRogue(const IbRogue&) = delete;
  IbRogue& operator=(const IbRogue&) = delete;

  struct Cts {
    uint64_t addr = 0;
    uint32_t rkey = 0;
    uint64_t size = 0;
    int32_t tag = 0;
    uint32_t seq = 0;  // the receive's sequence number (the entry carries it + 1)
  };
  // The victim's clear-to-send entry for its first receive (FIFO slot 0).
  std::optional<Cts> waitCts(Ms limit = Ms(10000));

  // One work request from the rogue's own buffer (bytes 0x77), waited for; returns its completion status
  // (IBV_WC_GENERAL_ERR when none came within the limit). `imm`: write with immediate (host order; sent in
  // network order as ICN does).
  ibv_wc_status write(uint64_t remoteAddr, uint32_t rkey, uint32_t len, std::optional<uint32_t> imm);
  ibv_wc_status read(uint64_t remoteAddr, uint32_t rkey, uint32_t len);  // into the rogue's buffer
  ibv_wc_status sendEmpty();
  const uint8_t* buffer() const { return buf_; }
  static constexpr size_t kBufferBytes = 1 << 20;
  // Destroys the QP and closes the control connection (a peer that dies).
  void closeAll();

 private:
  IbRogue() = default;
  ibv_wc_status post(ibv_send_wr& wr);
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* fifoMr_ = nullptr;
  ibv_mr* bufMr_ = nullptr;
  uint8_t* fifo_ = nullptr;
  uint8_t* buf_ = nullptr;
  Fd control_;
};

}  // namespace icn::adversary
