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
// Shorter keys are refused: a job key is meant to be random (e.g. `openssl rand -hex 32`), not a password.
constexpr size_t kMinKeyBytes = 16;

// Loads the key once. An unreadable or empty key file, or a key shorter than kMinKeyBytes, is an error
// (logged once, with the reason; never a silent fallback to no authentication): every listen and connect then
// fails. A key file readable by group or others is used, with a WARN.
Status init();
// Why init() failed ("" when it did not).
std::string problem();
bool enabled();
// The tag of a handshake message: HMAC-SHA256(key, msg) with a key; without one a plain SHA-256, which catches
// corrupt or foreign payloads, not a deliberate attacker (that needs the key).
Digest tag(std::span<const uint8_t> msg);
// Constant-time comparison of `got` against tag(msg).
bool verifyTag(std::span<const uint8_t> msg, std::span<const uint8_t> got);
// Fills the nonce from the kernel's random source; SystemError (logged) when none is available: a handshake
// never runs with a predictable nonce.
Status fillNonce(std::span<uint8_t, 16> nonce);
void failRandomForTesting(bool on);
void resetForTesting();
}  // namespace auth

}  // namespace icn
