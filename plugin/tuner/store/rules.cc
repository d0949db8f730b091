#include "tuner/store/rules.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace icn::tuner {
namespace {

constexpr const char* kFieldNames[] = {"coll", "minBytes", "maxBytes", "algo", "proto",
                                       "channels", "nNodes", "nRanks", "numPipeOps", "regBuff"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool parseInt64(std::string_view s, int64_t* out) {
  std::string tmp(s);
  if (tmp.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(tmp.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  *out = v;
  return true;
}

std::vector<std::string_view> splitFields(std::string_view line) {
  std::vector<std::string_view> f;
  while (true) {
    size_t c = line.find(',');
    f.push_back(trim(line.substr(0, c)));
    if (c == std::string_view::npos) return f;
    line.remove_prefix(c + 1);
  }
}

// What is wrong with a rule line: the field (0-based; -1: the line as a whole) and the problem.
struct FieldError {
  int field = -1;
  std::string problem;
};

bool fieldError(FieldError* e, int field, std::string problem) {
  *e = FieldError{field, std::move(problem)};
  return false;
}

// The byte range (fields 2 and 3): -1 is open on that side.
bool parseBytes(const std::vector<std::string_view>& f, Rule* r, FieldError* e) {
  int64_t v = 0;
  for (int i : {1, 2}) {
    if (!parseInt64(f[i], &v) || v < -1) return fieldError(e, i, "not a byte count: '" + std::string(f[i]) + "'");
    uint64_t b = v < 0 ? (i == 1 ? 0 : UINT64_MAX) : static_cast<uint64_t>(v);
    (i == 1 ? r->minBytes : r->maxBytes) = b;
  }
  if (r->minBytes > r->maxBytes) return fieldError(e, 2, "maxBytes is below minBytes");
  return true;
}

// Algorithm, protocol and channels (fields 4 to 6): the decision a matching call gets.
bool parseDecision(const std::vector<std::string_view>& f, Rule* r, FieldError* e) {
  if (f[3] != "-1") {
    int a = coll::parseAlgo(f[3]);
    if (a < 0)
      return fieldError(e, 3, "unknown algorithm '" + std::string(f[3]) +
                                  "' (tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat or -1)");
    r->decision.algo = static_cast<int8_t>(a);
  }
  if (f[4] != "-1") {
    int p = coll::parseProto(f[4]);
    if (p < 0) return fieldError(e, 4, "unknown protocol '" + std::string(f[4]) + "' (ll, ll128, simple or -1)");
    r->decision.proto = static_cast<int8_t>(p);
  }
  int64_t v = 0;
  if (!parseInt64(f[5], &v) || v < -1 || v == 0 || v > 64)
    return fieldError(e, 5, "channels must be -1 or 1..64, got '" + std::string(f[5]) + "'");
  r->decision.channels = static_cast<int16_t>(v < 0 ? 0 : v);
  return true;
}

bool parseRule(const std::vector<std::string_view>& f, Rule* r, FieldError* e) {
  if (f.size() < 8 || f.size() > 10)
    return fieldError(e, -1, "expected 8 to 10 comma-separated fields "
                             "(coll,minBytes,maxBytes,algo,proto,channels,nNodes,nRanks[,numPipeOps[,regBuff]]), got " +
                                 std::to_string(f.size()));
  if (f[0] == "-1" || f[0] == "any") {
    r->coll = -1;
  } else if ((r->coll = coll::parseColl(f[0])) < 0) {
    return fieldError(e, 0, "unknown collective '" + std::string(f[0]) +
                                "' (broadcast, reduce, allgather, reducescatter, allreduce or -1)");
  }
  if (!parseBytes(f, r, e) || !parseDecision(f, r, e)) return false;
  int* ints[] = {&r->nNodes, &r->nRanks, &r->numPipeOps, &r->regBuff};
  int64_t v = 0;
  for (size_t i = 6; i < f.size(); ++i) {
    if (!parseInt64(f[i], &v) || v < -1 || v > (1 << 30))
      return fieldError(e, static_cast<int>(i), "not an integer >= -1: '" + std::string(f[i]) + "'");
    *ints[i - 6] = static_cast<int>(v);
  }
  if (r->regBuff > 1) return fieldError(e, 9, "regBuff must be -1, 0 or 1");
  if (!r->decision.valid()) return fieldError(e, 3, "rule sets neither algorithm, protocol nor channels");
  return true;
}

}  // namespace

Status parseRules(std::string_view text, const std::string& source, std::vector<Rule>* out, std::string* why) {
  out->clear();
  int lineNo = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++lineNo;
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    Rule r;
    r.line = lineNo;
    FieldError e;
    if (!parseRule(splitFields(line), &r, &e)) {
      if (why) {
        std::ostringstream o;
        o << source << ":" << lineNo << ": ";
        if (e.field >= 0) o << "field " << e.field + 1 << " (" << kFieldNames[e.field] << "): ";
        o << e.problem;
        *why = o.str();
      }
      return Status::InvalidArgument;
    }
    out->push_back(r);
  }
  return Status::Ok;
}

Status loadRulesFile(const std::string& path, std::vector<Rule>* out, std::string* why) {
  std::ifstream in(path);
  if (!in) {
    if (why) *why = path + ": cannot open: " + strerror(errno);
    return Status::InvalidArgument;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parseRules(ss.str(), path, out, why);
}

void RuleTable::build(const std::vector<Rule>& rules, int nRanks, int nNodes) {
  rules_.clear();
  slots_ = {};
  truncated_ = 0;
  for (const Rule& r : rules)
    if ((r.nRanks < 0 || r.nRanks == nRanks) && (r.nNodes < 0 || r.nNodes == nNodes) && rules_.size() < 65535)
      rules_.push_back(r);
  for (int c = 0; c < coll::kNumColls; ++c) {
    for (int b = 0; b < coll::kNumBuckets; ++b) {
      uint64_t lo = b == 0 ? 0 : (uint64_t{1} << b);
      uint64_t hi = b == coll::kNumBuckets - 1 ? UINT64_MAX : (uint64_t{1} << (b + 1)) - 1;
      Slot& s = slots_[c][b];
      for (size_t i = 0; i < rules_.size(); ++i) {
        const Rule& r = rules_[i];
        if ((r.coll >= 0 && r.coll != c) || r.maxBytes < lo || r.minBytes > hi) continue;
        if (s.n == kPerBucket) {
          ++truncated_;
          break;
        }
        s.idx[s.n++] = static_cast<uint16_t>(i);
      }
    }
  }
}

const Rule* RuleTable::match(int c, uint64_t nBytes, int numPipeOps, int regBuff) const {
  if (c < 0 || c >= coll::kNumColls || rules_.empty()) return nullptr;
  const Slot& s = slots_[c][coll::bucketOf(nBytes)];
  for (int i = 0; i < s.n; ++i) {
    const Rule& r = rules_[s.idx[i]];
    if (nBytes >= r.minBytes && nBytes <= r.maxBytes && (r.numPipeOps < 0 || r.numPipeOps == numPipeOps) &&
        (r.regBuff < 0 || r.regBuff == regBuff))
      return &r;
  }
  return nullptr;
}

}  // namespace icn::tuner
