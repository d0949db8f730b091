#include "core/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "core/log.h"
#include "core/params.h"

namespace icn::auth {
namespace {
std::mutex g_mu;
bool g_loaded = false;
Status g_status = Status::Ok;
std::string g_problem;
std::string g_key;
std::atomic<bool> g_failRandom{false};

Status refuse(std::string why) {
  ICN_WARN(subsys::Init | subsys::Net, "%s: every listen and connect will fail", why.c_str());
  g_problem = std::move(why);
  g_key.clear();
  return g_status = Status::InvalidArgument;
}

// Reads the whole key file; the key is its content without trailing newlines.
Status readKeyFile(const std::string& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return refuse("ICN_AUTH_KEY_FILE=" + file + " cannot be read: " + strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)))
    ICN_WARN(subsys::Init | subsys::Net,
             "ICN_AUTH_KEY_FILE=%s is accessible by group or others (mode %04o): anyone who can read it can join "
             "the job; chmod 600 it", file.c_str(), static_cast<unsigned>(st.st_mode & 07777));
  std::string key;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      key.append(buf, static_cast<size_t>(n));
      if (key.size() <= 64 * 1024) continue;
      ::close(fd);
      return refuse("ICN_AUTH_KEY_FILE=" + file + " is larger than 64 KiB (not a key file?)");
    }
    if (n < 0 && errno == EINTR) continue;
    int err = errno;
    ::close(fd);
    if (n < 0) return refuse("ICN_AUTH_KEY_FILE=" + file + " cannot be read: " + strerror(err));
    break;
  }
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.empty()) return refuse("ICN_AUTH_KEY_FILE=" + file + " is empty");
  g_key = std::move(key);
  return Status::Ok;
}

Status loadLocked() {
  if (g_loaded) return g_status;
  g_loaded = true;
  g_key = params::getString(params::Id::AuthKey);
  const std::string& file = params::getString(params::Id::AuthKeyFile);
  const char* source = "ICN_AUTH_KEY";
  if (g_key.empty() && !file.empty()) {
    ICN_CHECK(readKeyFile(file));
    source = "ICN_AUTH_KEY_FILE";
  }
  if (!g_key.empty() && g_key.size() < kMinKeyBytes)
    return refuse(std::string(source) + " holds " + std::to_string(g_key.size()) + " bytes; at least " +
                  std::to_string(kMinKeyBytes) + " are required (e.g. the output of `openssl rand -hex 32`)");
  if (!g_key.empty())
    ICN_INFO(subsys::Init | subsys::Net, "handshake authentication on (HMAC-SHA256 job key from %s, %zu bytes)",
             source, g_key.size());
  return g_status = Status::Ok;
}

bool equalConstantTime(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) return false;
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); i++) diff |= a[i] ^ b[i];
  return diff == 0;
}
}  // namespace

Status init() {
  std::lock_guard lk(g_mu);
  return loadLocked();
}

std::string problem() {
  std::lock_guard lk(g_mu);
  loadLocked();
  return g_problem;
}

bool enabled() {
  std::lock_guard lk(g_mu);
  loadLocked();
  return !g_key.empty();
}

Digest tag(std::span<const uint8_t> msg) {
  std::lock_guard lk(g_mu);
  loadLocked();
  return g_key.empty() ? sha256(msg) : hmacSha256({reinterpret_cast<const uint8_t*>(g_key.data()), g_key.size()}, msg);
}

bool verifyTag(std::span<const uint8_t> msg, std::span<const uint8_t> got) {
  Digest want = tag(msg);
  return equalConstantTime(want, got);
}

Status fillNonce(std::span<uint8_t, 16> nonce) {
  size_t off = 0;
  while (off < nonce.size()) {
    ssize_t r = g_failRandom.load() ? (errno = ENOSYS, -1) : getrandom(nonce.data() + off, nonce.size() - off, 0);
    if (r > 0) {
      off += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    ICN_WARN(subsys::Net, "no random bytes for a handshake nonce (getrandom: %s): refusing to connect with a "
             "predictable one", r < 0 ? strerror(errno) : "short read");
    memset(nonce.data(), 0, nonce.size());
    return Status::SystemError;
  }
  return Status::Ok;
}

void failRandomForTesting(bool on) { g_failRandom = on; }

void resetForTesting() {
  std::lock_guard lk(g_mu);
  g_loaded = false;
  g_key.clear();
  g_problem.clear();
  g_status = Status::Ok;
}

}  // namespace icn::auth
