// A hostile peer of ICN's ib transport, written against raw libibverbs: it completes the handshake as a sender
// (its blob names one RC QP and a CTS FIFO that the victim writes into), connects its QP to the victim's, reads
// the victim's clear-to-send entry (the receive's address, rkey, size, tag and sequence) and then posts any work
// request it likes: RDMA writes with or without an immediate of any length and any address, RDMA reads, sends.
// As a receiver (listen/accept) it plays the other side: the victim sends to it, and the rogue writes whatever
// clear-to-send entries it likes into the victim's FIFO. The NIC enforces the rkey's bounds and access rights;
// the victim has to enforce everything else.
#pragma once
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/socket.h"
#include "core/transport.h"
#include "hostile_peer.h"
#include "transport/ib/ib_wire.h"

namespace icn::adversary {

class IbRogue {
 public:
  // `dev`: the verbs device to use (GID index 0).
  static std::unique_ptr<IbRogue> connect(const SockAddr& to, uint64_t commId, const std::string& dev, Ms limit,
                                          std::string* why);
  // The receiving side: a listener whose handle a victim connects to; accept() runs the acceptor's handshake.
  static std::unique_ptr<IbRogue> listen(const std::string& dev, HandleBytes handle, std::string* why);
  bool accept(uint64_t commId, Ms limit, std::string* why);
  // The listener's address without its port: how the victim names this peer.
  std::string address() const { return bound_.str().substr(0, bound_.str().rfind(':')); }
  // Writes `e` into slot 0 of the victim's CTS FIFO (as a receiver's irecv does); true when the write completed.
  bool writeCts(const ib::CtsEntry& e);
  // Memory the victim may write into (REMOTE_WRITE), and its key.
  uint64_t landingAddr() const { return reinterpret_cast<uint64_t>(land_); }
  uint32_t landingKey() const { return landMr_->rkey; }
  const uint8_t* landing() const { return land_; }
  // Bytes that arrived by write-with-immediate until `want` arrived or `limit` passed.
  uint64_t receivedBytes(uint64_t want, Ms limit);
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
  bool open(const std::string& dev, std::string* why);  // device, PD, CQs, memory, one RC QP in INIT
  ib::ConnBlob localBlob() const;
  bool connectQp(const ib::ConnBlob& victim, std::string* why);
  ibv_wc_status post(ibv_send_wr& wr);
  ib::DevAddr me_;
  ib::ConnBlob victim_;
  Fd listener_;
  SockAddr bound_;
  ibv_cq* rcq_ = nullptr;
  ibv_mr* landMr_ = nullptr;
  uint8_t* land_ = nullptr;
  uint64_t received_ = 0;
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
