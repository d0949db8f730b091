#include "probe_util.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdlib>
#include <cstring>

#include "core/json.h"

namespace icnprobe {

void Options::add(const std::string& name, std::string def, std::string help) {
  order_.push_back(name);
  values_[name] = def;
  opts_[name] = Opt{std::move(def), std::move(help)};
}

bool Options::parse(int argc, char** argv, int* exitCode) {
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      printf("%s: %s\n\noptions:\n", tool_.c_str(), summary_.c_str());
      for (const std::string& n : order_)
        printf("  --%-14s %s (default: %s)\n", n.c_str(), opts_[n].help.c_str(),
               opts_[n].def.empty() ? "none" : opts_[n].def.c_str());
      *exitCode = 0;
      return false;
    }
    if (arg.rfind("--", 0) != 0) {
      fprintf(stderr, "%s: unexpected argument '%s' (try --help)\n", tool_.c_str(), arg.c_str());
      *exitCode = 2;
      return false;
    }
    std::string name = arg.substr(2), value;
    size_t eq = name.find('=');
    bool inlineValue = eq != std::string::npos;
    if (inlineValue) value = name.substr(eq + 1), name = name.substr(0, eq);
    if (!opts_.count(name)) {
      fprintf(stderr, "%s: unknown option --%s (try --help)\n", tool_.c_str(), name.c_str());
      *exitCode = 2;
      return false;
    }
    if (!inlineValue) {
      if (i + 1 >= argc) {
        fprintf(stderr, "%s: --%s needs a value\n", tool_.c_str(), name.c_str());
        *exitCode = 2;
        return false;
      }
      value = argv[++i];
    }
    values_[name] = value;
  }
  return true;
}

long long Options::integer(const std::string& name) const { return strtoll(str(name).c_str(), nullptr, 0); }

size_t Options::size(const std::string& name) const {
  size_t v = 0;
  parseSize(str(name), &v);
  return v;
}

ProbeCli::ProbeCli(const std::string& tool, const std::string& summary, const std::string& sizeHelp,
                   const std::string& itersDefault)
    : tool_(tool), opt_(tool, summary) {
  opt_.add("size", "256M", sizeHelp);
  opt_.add("iters", itersDefault, "copies per bandwidth measurement");
  opt_.add("devices", "", "comma list or range of CUDA devices (default: all)");
  opt_.add("json", "", "also write the results to this JSON file");
}

bool ProbeCli::parse(int argc, char** argv, size_t sizeAlign, int* exitCode) {
  if (!opt_.parse(argc, argv, exitCode)) return false;
  size = opt_.size("size") / sizeAlign * sizeAlign;
  iters = static_cast<int>(opt_.integer("iters"));
  devices = parseIntList(opt_.str("devices"));
  json = opt_.str("json");
  if (size == 0 || iters < 1) {
    std::string least = sizeAlign > 1 ? ">= " + std::to_string(sizeAlign) + " bytes" : "> 0";
    fprintf(stderr, "%s: --size must be %s and --iters >= 1\n", tool_.c_str(), least.c_str());
    *exitCode = 2;
    return false;
  }
  return true;
}

bool ProbeCli::writeReport(const std::string& fields) const {
  return writeTextFile(json, "{\"tool\":\"" + tool_ + "\",\"size\":" + std::to_string(size) +
                                 ",\"iters\":" + std::to_string(iters) + fields + "}\n");
}

void appendJsonItem(std::string& list, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (!list.empty()) list += ',';
  list.append(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
}

bool parseSize(const std::string& text, size_t* out) {
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0) return false;
  double unit = 1;
  switch (*end) {
    case 'k': case 'K': unit = 1024.0; end++; break;
    case 'm': case 'M': unit = 1024.0 * 1024; end++; break;
    case 'g': case 'G': unit = 1024.0 * 1024 * 1024; end++; break;
    default: break;
  }
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v * unit);
  return true;
}

std::vector<int> parseIntList(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = item.find('-');
    if (!item.empty()) {
      if (dash != std::string::npos && dash > 0) {
        int lo = atoi(item.substr(0, dash).c_str()), hi = atoi(item.substr(dash + 1).c_str());
        for (int v = lo; v <= hi; v++) out.push_back(v);
      } else {
        out.push_back(atoi(item.c_str()));
      }
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  rank = std::max<size_t>(1, std::min(rank, v.size()));
  return v[rank - 1];
}

std::string jsonEscape(const std::string& s) {
  std::string q = icn::json::quote(s);  // the project's one JSON writer; the probes want it without the quotes
  return q.substr(1, q.size() - 2);
}

bool writeTextFile(const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    fprintf(stderr, "cannot write %s: %s\n", path.c_str(), strerror(errno));
    return false;
  }
  bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = (fclose(f) == 0) && ok;
  if (!ok) fprintf(stderr, "short write to %s\n", path.c_str());
  return ok;
}

}  // namespace icnprobe
