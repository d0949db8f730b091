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
void fillNonce(std::span<uint8_t, 16> nonce);
void resetForTesting();
}  // namespace auth

}  // namespace icn
