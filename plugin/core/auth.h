// Optional job-key authentication of the out-of-band handshake (ICN_AUTH_KEY / ICN_AUTH_KEY_FILE).
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace icn {

using Digest = std::array<uint8_t, 32>;

Digest sha256(std::span<const uint8_t> data);
Digest hmacSha256(std::span<const uint8_t> key, std::span<const uint8_t> msg);

namespace auth {
// Loads the key once; an unreadable key file is an error (never silently unauthenticated).
Status init();
bool enabled();
// mac = HMAC(key, role | nonceC | nonceA); role 'C' for the connector, 'A' for the acceptor.
std::vector<uint8_t> mac(char role, std::span<const uint8_t, 16> nonceC, std::span<const uint8_t, 16> nonceA);
// Constant-time comparison against the expected mac.
bool verify(char role, std::span<const uint8_t, 16> nonceC, std::span<const uint8_t, 16> nonceA,
            std::span<const uint8_t> got);
// Tag carried by every HELLO, checked before the transport parses the peer's blob (UCX aborts the process
// on a malformed worker address): over role | nonceC | nonceA | SHA-256(blob). With a key it is
// HMAC-SHA256(key, .) and proves knowledge of it; without one it is a plain SHA-256 that catches corrupt
// or foreign payloads, not a deliberate attacker (that needs the key). The connector's HELLO uses role 'H'
// and a zero nonceA (it does not know it yet).
std::vector<uint8_t> helloTag(char role, std::span<const uint8_t, 16> nonceC, std::span<const uint8_t, 16> nonceA,
                              std::span<const uint8_t> blob);
bool verifyHelloTag(char role, std::span<const uint8_t, 16> nonceC, std::span<const uint8_t, 16> nonceA,
                    std::span<const uint8_t> blob, std::span<const uint8_t> got);
void fillNonce(std::span<uint8_t, 16> nonce);
void resetForTesting();
}  // namespace auth

}  // namespace icn
