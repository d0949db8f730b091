#include "diagnose/hang_report.h"

#include <sys/stat.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "diagnose/summary.h"

namespace icn::diagnose {
namespace {

std::string num(double v) { return json::number(v, 6); }

std::string waitJson(const WaitEntry& w) {
  return "{\"commId\":\"" + commIdText(w.commId) + "\",\"rank\":" + std::to_string(w.rank) +
         ",\"peerRank\":" + std::to_string(w.peerRank) + ",\"dir\":\"" + dirName(w.dir) +
         "\",\"peerHost\":" + json::quote(w.peerHost) + ",\"peerAddr\":" + json::quote(w.peerAddr) +
         ",\"tag\":" + std::to_string(w.tag) + ",\"bytes\":" + std::to_string(w.bytes) +
         ",\"bytes_done\":" + std::to_string(w.bytesDone) + ",\"ready\":" + (w.ready ? "true" : "false") +
         ",\"posted_s\":" + num(w.postedS) + ",\"progress_s\":" + num(w.progressS) + "}";
}

// Field readers that refuse what a report cannot hold.
struct Reader {
  const json::Value& o;
  std::string* why;
  bool fail(const std::string& what) {
    *why = what;
    return false;
  }
  bool str(const char* key, std::string* out, bool required = false) {
    const json::Value* v = o.get(key);
    if (!v) return !required || fail(std::string("missing ") + key);
    if (!v->isString() || v->str.size() > kMaxNameBytes) return fail(std::string("bad ") + key);
    *out = v->str;
    return true;
  }
  bool number(const char* key, double lo, double hi, double* out, bool required = true) {
    const json::Value* v = o.get(key);
    if (!v) return !required || fail(std::string("missing ") + key);
    if (!v->isNumber() || !(v->num >= lo && v->num <= hi)) return fail(std::string("bad ") + key);
    *out = v->num;
    return true;
  }
  template <typename T>
  bool integer(const char* key, double lo, double hi, T* out, bool required = true) {
    double d = 0;
    if (!number(key, lo, hi, &d, required)) return false;
    if (d != std::floor(d)) return fail(std::string("bad ") + key);
    if (o.get(key)) *out = static_cast<T>(d);
    return true;
  }
  bool comm(uint64_t* out) {
    std::string s;
    return (str("commId", &s, true) && parseCommId(s, out)) || fail("bad commId");
  }
};

constexpr double kMaxRank = 1 << 24, kMaxAge = 1e9, kMaxBytes = 9.007e15;

bool waitFromJson(const json::Value& o, WaitEntry* w, std::string* why) {
  if (!o.isObject()) return (*why = "a wait is not an object"), false;
  Reader r{o, why};
  std::string dir;
  if (!r.comm(&w->commId) || !r.integer("rank", -1, kMaxRank, &w->rank) ||
      !r.integer("peerRank", -1, kMaxRank, &w->peerRank) || !r.str("dir", &dir, true) ||
      !r.str("peerHost", &w->peerHost) || !r.str("peerAddr", &w->peerAddr) ||
      !r.integer("tag", -2147483648.0, 2147483647.0, &w->tag, false) ||
      !r.integer("bytes", 0, kMaxBytes, &w->bytes, false) ||
      !r.integer("bytes_done", 0, kMaxBytes, &w->bytesDone, false) ||
      !r.number("posted_s", 0, kMaxAge, &w->postedS) || !r.number("progress_s", 0, kMaxAge, &w->progressS, false))
    return false;
  if (dir != "send" && dir != "recv") return r.fail("bad dir");
  w->dir = dir == "send" ? Dir::Send : Dir::Recv;
  const json::Value* ready = o.get("ready");
  w->ready = ready && ready->kind == json::Value::Kind::Bool && ready->b;
  return true;
}

bool rankFromJson(const json::Value& o, RankEntry* e, std::string* why) {
  if (!o.isObject()) return (*why = "a rank is not an object"), false;
  Reader r{o, why};
  return r.comm(&e->commId) && r.integer("rank", -1, kMaxRank, &e->rank) &&
         r.integer("nranks", 0, kMaxRank, &e->nranks, false) && r.str("addr", &e->addr);
}

bool fromValue(const json::Value& v, ProcessReport* out, std::string* why) {
  if (!v.isObject() || v.string("schema") != "icn-hang") return (*why = "not an icn-hang report"), false;
  if (v.number("version", 0) != kHangSchemaVersion) return (*why = "unsupported icn-hang version"), false;
  Reader r{v, why};
  ProcessReport p;
  std::string state;
  if (!r.str("host", &p.host, true) || !r.integer("pid", 0, 4194304, &p.pid) ||
      !r.integer("time_unix_ms", 0, 1e16, &p.timeUnixMs) || !r.str("state", &state, true) ||
      !r.number("no_progress_s", 0, kMaxAge, &p.noProgressS) ||
      !r.number("report_after_s", 0, kMaxAge, &p.reportAfterS, false))
    return false;
  if (state != "stalled" && state != "resumed") return r.fail("bad state");
  p.stalled = state == "stalled";
  const json::Value* ranks = v.get("ranks");
  const json::Value* waits = v.get("waits");
  if (!ranks || !ranks->isArray() || !waits || !waits->isArray()) return r.fail("ranks and waits must be arrays");
  if (ranks->arr.size() > kMaxWaitsPerReport || waits->arr.size() > kMaxWaitsPerReport)
    return r.fail("too many ranks or waits");
  for (const json::Value& e : ranks->arr) {
    RankEntry re;
    if (!rankFromJson(e, &re, why)) return false;
    p.ranks.push_back(std::move(re));
  }
  for (const json::Value& e : waits->arr) {
    WaitEntry we;
    if (!waitFromJson(e, &we, why)) return false;
    p.waits.push_back(std::move(we));
  }
  *out = std::move(p);
  return true;
}

}  // namespace

std::string toJson(const ProcessReport& r) {
  std::string o = "{\"schema\":\"icn-hang\",\"version\":" + std::to_string(kHangSchemaVersion) +
                  ",\"host\":" + json::quote(r.host) + ",\"pid\":" + std::to_string(r.pid) +
                  ",\"time_unix_ms\":" + std::to_string(r.timeUnixMs) + ",\"state\":\"" +
                  (r.stalled ? "stalled" : "resumed") + "\",\"no_progress_s\":" + num(r.noProgressS) +
                  ",\"report_after_s\":" + num(r.reportAfterS) + ",\n \"ranks\":[";
  for (size_t i = 0; i < r.ranks.size(); i++) {
    const RankEntry& e = r.ranks[i];
    o += std::string(i ? "," : "") + "{\"commId\":\"" + commIdText(e.commId) + "\",\"rank\":" +
         std::to_string(e.rank) + ",\"nranks\":" + std::to_string(e.nranks) + ",\"addr\":" + json::quote(e.addr) + "}";
  }
  o += "],\n \"waits\":[";
  for (size_t i = 0; i < r.waits.size(); i++) o += (i ? ",\n  " : "\n  ") + waitJson(r.waits[i]);
  return o + "]}\n";
}

bool reportFromJson(const std::string& text, ProcessReport* out, std::string* why) {
  if (text.size() > kMaxReportBytes) return (*why = "report larger than 16 MiB"), false;
  json::Value v;
  std::string err;
  if (!json::parse(text, v, err)) return (*why = err), false;
  return fromValue(v, out, why);
}

std::string mergedJson(const std::vector<ProcessReport>& reports, const std::vector<std::string>& analyses,
                       int64_t timeUnixMs) {
  std::string o = "{\"schema\":\"icn-hang-merged\",\"version\":" + std::to_string(kHangSchemaVersion) +
                  ",\"time_unix_ms\":" + std::to_string(timeUnixMs) + ",\n\"analysis\":[";
  for (size_t i = 0; i < analyses.size(); i++) o += (i ? ",\n" : "\n") + analyses[i];
  o += "],\n\"reports\":[";
  for (size_t i = 0; i < reports.size(); i++) o += (i ? ",\n" : "\n") + toJson(reports[i]);
  return o + "]}\n";
}

bool reportsFromJson(const std::string& text, std::vector<ProcessReport>* out, std::string* why) {
  if (text.size() > kMaxReportBytes) return (*why = "report larger than 16 MiB"), false;
  json::Value v;
  std::string err;
  if (!json::parse(text, v, err)) return (*why = err), false;
  if (v.isObject() && v.string("schema") == "icn-hang-merged") {
    if (v.number("version", 0) != kHangSchemaVersion) return (*why = "unsupported icn-hang-merged version"), false;
    const json::Value* reports = v.get("reports");
    if (!reports || !reports->isArray() || reports->arr.size() > kMaxReportsMerged)
      return (*why = "bad reports array"), false;
    std::vector<ProcessReport> got(reports->arr.size());
    for (size_t i = 0; i < got.size(); i++)
      if (!fromValue(reports->arr[i], &got[i], why)) return false;
    out->insert(out->end(), got.begin(), got.end());
    return true;
  }
  ProcessReport p;
  if (!fromValue(v, &p, why)) return false;
  out->push_back(std::move(p));
  return true;
}

bool readReports(const std::string& path, std::vector<ProcessReport>* out, std::string* why) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return (*why = "not a readable file"), false;
  if (static_cast<uint64_t>(st.st_size) > kMaxReportBytes) return (*why = "larger than 16 MiB"), false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return (*why = "cannot open"), false;
  std::stringstream ss;
  ss << in.rdbuf();
  return reportsFromJson(ss.str(), out, why);
}

std::string reportFileName(const std::string& host, int pid) {
  std::string h;
  for (char c : host) h += (isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_') ? c : '_';
  return "icn-hang-" + (h.empty() ? std::string("unknown") : h) + "-" + std::to_string(pid) + ".json";
}

std::string mergedFileName(uint64_t commId) { return "icn-hang-merged-" + commIdText(commId) + ".json"; }

bool isReportFileName(const std::string& name) {
  return name.rfind("icn-hang-", 0) == 0 && name.size() > 14 && name.compare(name.size() - 5, 5, ".json") == 0;
}

}  // namespace icn::diagnose
