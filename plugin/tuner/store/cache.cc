#include "tuner/store/cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

#include "core/private_file.h"
#include "telemetry/coll_names.h"

namespace icn::tuner {
namespace {
constexpr const char* kHeader = "# icn-tuner-cache v1";
constexpr const char* kKeyPrefix = "# key: ";
constexpr const char* kColumns = "coll,nRanks,nNodes,bucket_log2,algo,proto,channels,mean_us,samples";
constexpr const char* kFields[] = {"coll", "nRanks", "nNodes", "bucket_log2", "algo",
                                   "proto", "channels", "mean_us", "samples"};

bool toLong(const std::string& s, long long* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = strtoll(s.c_str(), &end, 10);
  return *end == '\0';
}
}  // namespace

Status parseCache(std::string_view text, const std::string& source, std::vector<CacheEntry>* out, std::string* why,
                  std::string* key) {
  out->clear();
  if (key) key->clear();
  std::istringstream in{std::string(text)};
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (key && line.rfind(kKeyPrefix, 0) == 0) *key = line.substr(strlen(kKeyPrefix));
    if (line.empty() || line[0] == '#' || line == kColumns) continue;
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string tok;
    while (std::getline(ls, tok, ',')) f.push_back(tok);
    auto err = [&](int field, const std::string& problem) {
      if (why)
        *why = source + ":" + std::to_string(lineNo) + ": " +
               (field >= 0 ? "field " + std::to_string(field + 1) + " (" + kFields[field] + "): " : "") + problem;
      return Status::InvalidArgument;
    };
    if (f.size() != 9) return err(-1, "expected 9 fields (" + std::string(kColumns) + ")");
    CacheEntry e;
    long long v = 0;
    if ((e.coll = coll::parseColl(f[0])) < 0) return err(0, "unknown collective '" + f[0] + "'");
    if (!toLong(f[1], &v) || v < 1) return err(1, "bad value '" + f[1] + "'");
    e.nRanks = static_cast<int>(v);
    if (!toLong(f[2], &v) || v < 1) return err(2, "bad value '" + f[2] + "'");
    e.nNodes = static_cast<int>(v);
    if (!toLong(f[3], &v) || v < 0 || v >= coll::kNumBuckets) return err(3, "bad bucket '" + f[3] + "'");
    e.bucket = static_cast<int>(v);
    int a = f[4] == "-1" ? -1 : coll::parseAlgo(f[4]);
    if (a < 0 && f[4] != "-1") return err(4, "unknown algorithm '" + f[4] + "'");
    int p = f[5] == "-1" ? -1 : coll::parseProto(f[5]);
    if (p < 0 && f[5] != "-1") return err(5, "unknown protocol '" + f[5] + "'");
    if (!toLong(f[6], &v) || v < 0 || v > 64) return err(6, "bad channel count '" + f[6] + "'");
    e.decision = Decision{static_cast<int8_t>(a), static_cast<int8_t>(p), static_cast<int16_t>(v)};
    char* end = nullptr;
    e.meanUs = strtod(f[7].c_str(), &end);
    if (f[7].empty() || *end != '\0' || e.meanUs < 0) return err(7, "bad time '" + f[7] + "'");
    if (!toLong(f[8], &v) || v < 0) return err(8, "bad sample count '" + f[8] + "'");
    e.samples = static_cast<uint64_t>(v);
    out->push_back(e);
  }
  return Status::Ok;
}

Status loadCache(const std::string& path, std::vector<CacheEntry>* out, std::string* why, const std::string& key) {
  out->clear();
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return Status::Ok;
    if (why) *why = path + ": cannot open: " + strerror(errno);
    return Status::SystemError;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string fileKey;
  Status st = parseCache(ss.str(), path, out, why, &fileKey);
  if (st == Status::Ok && !key.empty() && fileKey != key) {
    out->clear();
    if (why) *why = path + ": written for another machine, NCCL version or communicator shape (key '" + fileKey + "')";
  }
  return st;
}

std::string renderCache(const std::vector<CacheEntry>& entries, const std::string& key) {
  std::vector<CacheEntry> sorted = entries;
  std::sort(sorted.begin(), sorted.end(), [](const CacheEntry& a, const CacheEntry& b) {
    return std::tie(a.nRanks, a.nNodes, a.coll, a.bucket) < std::tie(b.nRanks, b.nNodes, b.coll, b.bucket);
  });
  std::string out = std::string(kHeader) + "\n";
  if (!key.empty()) out += kKeyPrefix + key + "\n";
  out += std::string(kColumns) + "\n";
  char buf[256];
  for (const CacheEntry& e : sorted) {
    snprintf(buf, sizeof buf, "%s,%d,%d,%d,%s,%s,%d,%.3f,%llu\n", coll::collName(e.coll), e.nRanks, e.nNodes,
             e.bucket, e.decision.algo >= 0 ? coll::algoName(e.decision.algo) : "-1",
             e.decision.proto >= 0 ? coll::protoName(e.decision.proto) : "-1", e.decision.channels, e.meanUs,
             static_cast<unsigned long long>(e.samples));
    out += buf;
  }
  return out;
}

namespace {
// Holds flock() on the cache file's directory: concurrent jobs merge one after the other. Waits a bounded time;
// without the lock the merge still replaces the file atomically (an entry another job wrote meanwhile may be lost,
// the file is never corrupt).
class DirLock {
 public:
  explicit DirLock(const std::string& path) {
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    fd_ = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; fd_ >= 0 && i < 200; ++i) {  // 2 s
      if (flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        locked_ = true;
        return;
      }
      usleep(10000);
    }
  }
  ~DirLock() {
    if (locked_) flock(fd_, LOCK_UN);
    if (fd_ >= 0) close(fd_);
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
  bool locked_ = false;
};
}  // namespace

Status saveCache(const std::string& path, const std::vector<CacheEntry>& entries, std::string* why,
                 const std::string& key) {
  DirLock lock(path);
  std::vector<CacheEntry> merged;
  std::string loadWhy;
  if (loadCache(path, &merged, &loadWhy, key) != Status::Ok) merged.clear();  // a broken file is replaced
  for (const CacheEntry& e : entries) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const CacheEntry& m) { return m.sameKey(e); });
    if (it != merged.end()) *it = e;
    else merged.push_back(e);
  }
  return privfile::writeAtomic(path, renderCache(merged, key), /*sync=*/true, why);
}

}  // namespace icn::tuner
