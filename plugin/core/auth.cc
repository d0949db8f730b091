#include "core/auth.h"

#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include "core/log.h"
#include "core/params.h"

namespace icn::auth {
namespace {
std::mutex g_mu;
bool g_loaded = false;
Status g_status = Status::Ok;
std::string g_key;

Status loadLocked() {
  if (g_loaded) return g_status;
  g_loaded = true;
  g_key = params::getString(params::Id::AuthKey);
  const std::string& file = params::getString(params::Id::AuthKeyFile);
  if (g_key.empty() && !file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      ICN_WARN(subsys::Init | subsys::Net, "ICN_AUTH_KEY_FILE=%s cannot be read: %s", file.c_str(), strerror(errno));
      return g_status = Status::InvalidArgument;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    g_key = ss.str();
    while (!g_key.empty() && (g_key.back() == '\n' || g_key.back() == '\r')) g_key.pop_back();
    if (g_key.empty()) {
      ICN_WARN(subsys::Init | subsys::Net, "ICN_AUTH_KEY_FILE=%s is empty", file.c_str());
      return g_status = Status::InvalidArgument;
    }
  }
  if (!g_key.empty())
    ICN_INFO(subsys::Init | subsys::Net, "handshake authentication on (HMAC-SHA256 job key, %zu bytes)", g_key.size());
  return g_status = Status::Ok;
}
}  // namespace

Status init() {
  std::lock_guard lk(g_mu);
  return loadLocked();
}

bool enabled() {
  std::lock_guard lk(g_mu);
  loadLocked();
  return !g_key.empty();
}

std::vector<uint8_t> mac(char role, std::span<const uint8_t, 16> nonceC, std::span<const uint8_t, 16> nonceA) {
  std::lock_guard lk(g_mu);
  loadLocked();
  if (g_key.empty()) return {};
  uint8_t msg[33];
  msg[0] = static_cast<uint8_t>(role);
  memcpy(msg + 1, nonceC.data(), 16);
  memcpy(msg + 17, nonceA.data(), 16);
  Digest d = hmacSha256({reinterpret_cast<const uint8_t*>(g_key.data()), g_key.size()}, msg);
  return {d.begin(), d.end()};
}

bool verify(char role, std::span<const uint8_t, 16> nonceC, std::span<const uint8_t, 16> nonceA,
            std::span<const uint8_t> got) {
  std::vector<uint8_t> want = mac(role, nonceC, nonceA);
  if (want.size() != got.size()) return false;
  uint8_t diff = 0;
  for (size_t i = 0; i < want.size(); i++) diff |= want[i] ^ got[i];
  return diff == 0;
}

void fillNonce(std::span<uint8_t, 16> nonce) {
  size_t off = 0;
  while (off < nonce.size()) {
    ssize_t r = getrandom(nonce.data() + off, nonce.size() - off, 0);
    if (r <= 0) break;
    off += static_cast<size_t>(r);
  }
}

void resetForTesting() {
  std::lock_guard lk(g_mu);
  g_loaded = false;
  g_key.clear();
  g_status = Status::Ok;
}

}  // namespace icn::auth
