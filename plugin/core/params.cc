#include "core/params.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <strings.h>

#include "core/log.h"

namespace icn::params {
namespace {

struct Value {
  std::string str;
  int64_t num = 0;
  bool fromEnv = false;
};

// Decimal digits with an optional sign: the defaults in params.def, checked against their bounds at compile time.
constexpr bool parseDecimal(const char* s, int64_t* out) {
  bool negative = *s == '-';
  if (negative) s++;
  if (!*s) return false;
  int64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (*s - '0');
  }
  *out = negative ? -v : v;
  return true;
}

constexpr bool withinBounds(Type t, int64_t v, int64_t lo, int64_t hi) {
  return (v >= lo && v <= hi) || (t == Type::IntOrZero && v == 0);
}

constexpr bool defaultsWithinBounds() {
  struct Row {
    Type type;
    const char* def;
    int64_t lo, hi;
  };
  constexpr Row rows[] = {
#define ICN_PARAM(id, name, type, def, lo, hi, help) {Type::type, def, lo, hi},
#include "core/params.def"
#undef ICN_PARAM
  };
  for (const Row& r : rows) {
    if (r.lo > r.hi) return false;
    if (r.type != Type::Int && r.type != Type::IntOrZero && r.type != Type::Bool) continue;
    int64_t v = 0;
    if (!parseDecimal(r.def, &v) || !withinBounds(r.type, v, r.lo, r.hi)) return false;
  }
  return true;
}
static_assert(defaultsWithinBounds(), "params.def: a default is not a decimal within its bounds (or min > max)");

int64_t parseDefault(const Info& p) {
  int64_t v = 0;
  parseDecimal(p.defaultValue, &v);
  return v;
}

// The one place a setting's value is checked: not an integer, or outside its bounds, is refused with a WARN and the
// default is used.
int64_t parseInt(const Info& p, const std::string& s) {
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(s.c_str(), &end, 0);
  if (s.empty() || *end != '\0' || errno == ERANGE) {
    ICN_WARN(subsys::Env, "%s=\"%s\" is not an integer; using the default %s", p.name, s.c_str(), p.defaultValue);
    return parseDefault(p);
  }
  if (!withinBounds(p.type, v, p.min, p.max)) {
    ICN_WARN(subsys::Env, "%s=%lld is outside its range %s; using the default %s", p.name, v,
             rangeText(p.id).c_str(), p.defaultValue);
    return parseDefault(p);
  }
  return v;
}

int64_t parseBool(const char* name, const std::string& s, const char* def) {
  const char* v = s.c_str();
  if (!strcasecmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on")) return 1;
  if (!strcasecmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off")) return 0;
  ICN_WARN(subsys::Env, "%s=\"%s\" is not a boolean; using default %s", name, v, def);
  return strtoll(def, nullptr, 0);
}

std::vector<Value>& values() {
  static std::vector<Value> v(static_cast<size_t>(Id::Count));
  return v;
}

std::once_flag g_loaded;

void load() {
  auto& vals = values();
  for (const Info& p : table()) {
    Value& v = vals[static_cast<size_t>(p.id)];
    const char* env = std::getenv(p.name);
    v.fromEnv = env != nullptr;
    v.str = env ? env : p.defaultValue;
    switch (p.type) {
      case Type::Int:
      case Type::IntOrZero: v.num = parseInt(p, v.str); break;
      case Type::Bool: v.num = parseBool(p.name, v.str, p.defaultValue); break;
      case Type::String:
      case Type::Enum:
      case Type::Secret: break;
    }
  }
}

const Value& get(Id id) {
  std::call_once(g_loaded, load);
  return values()[static_cast<size_t>(id)];
}

const char* typeName(Type t) {
  switch (t) {
    case Type::Bool: return "bool";
    case Type::Int:
    case Type::IntOrZero: return "int";
    case Type::String: return "string";
    case Type::Enum: return "enum";
    case Type::Secret: return "secret";
  }
  return "?";
}

}  // namespace

const std::vector<Info>& table() {
  static const std::vector<Info> t = {
#define ICN_PARAM(id, name, type, def, lo, hi, help) {Id::id, name, Type::type, def, lo, hi, help},
#include "core/params.def"
#undef ICN_PARAM
  };
  return t;
}

int64_t getInt(Id id) { return get(id).num; }
bool getBool(Id id) { return get(id).num != 0; }
const std::string& getString(Id id) { return get(id).str; }
bool isSetByUser(Id id) { return get(id).fromEnv; }

std::string rangeText(Id id) {
  const Info& p = table()[static_cast<size_t>(id)];
  const std::string span = std::to_string(p.min) + ".." + std::to_string(p.max);
  switch (p.type) {
    case Type::Bool: return "0/1";
    case Type::Int: return span;
    case Type::IntOrZero: return "0, or " + span;
    case Type::String:
    case Type::Enum:
    case Type::Secret: break;
  }
  return "";
}

std::string displayValue(Id id) {
  const Value& v = get(id);
  if (table()[static_cast<size_t>(id)].type != Type::Secret || v.str.empty()) return v.str;
  return "<set, " + std::to_string(v.str.size()) + " bytes>";
}

std::string getStringNow(Id id) {
  const Info& p = table()[static_cast<size_t>(id)];
  const char* env = std::getenv(p.name);
  return env ? env : p.defaultValue;
}

void logOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const Info& p : table()) {
      const Value& v = get(p.id);
      const std::string shown = displayValue(p.id);
      ICN_INFO(subsys::Init | subsys::Env, "param %s=%s (%s, %s)", p.name, shown.empty() ? "\"\"" : shown.c_str(),
               typeName(p.type), v.fromEnv ? "from environment" : "default");
    }
  });
}

void reloadForTesting() {
  std::call_once(g_loaded, [] {});
  load();
}

std::string markdownTable() {
  std::string out = "| Variable | Type | Default | Range | Meaning |\n|---|---|---|---|---|\n";
  auto cell = [](std::string s) {  // a '|' inside help text would split the Markdown cell
    for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
    return s;
  };
  for (const Info& p : table()) {
    const std::string range = rangeText(p.id);
    out += std::string("| `") + p.name + "` | " + typeName(p.type) + " | `" + p.defaultValue + "` | " +
           (range.empty() ? "" : "`" + range + "`") + " | " + cell(p.help) + " |\n";
  }
  return out;
}

}  // namespace icn::params
