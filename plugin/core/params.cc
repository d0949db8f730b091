#include "core/params.h"

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

int64_t parseInt(const char* name, const std::string& s, const char* def) {
  char* end = nullptr;
  long long v = strtoll(s.c_str(), &end, 0);
  if (s.empty() || *end != '\0') {
    ICN_WARN(subsys::Env, "%s=\"%s\" is not an integer; using default %s", name, s.c_str(), def);
    return strtoll(def, nullptr, 0);
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
      case Type::Int: v.num = parseInt(p.name, v.str, p.defaultValue); break;
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
    case Type::Int: return "int";
    case Type::String: return "string";
    case Type::Enum: return "enum";
    case Type::Secret: return "secret";
  }
  return "?";
}

}  // namespace

const std::vector<Info>& table() {
  static const std::vector<Info> t = {
#define ICN_PARAM(id, name, type, def, help) {Id::id, name, Type::type, def, help},
#include "core/params.def"
#undef ICN_PARAM
  };
  return t;
}

int64_t getInt(Id id) { return get(id).num; }
bool getBool(Id id) { return get(id).num != 0; }
const std::string& getString(Id id) { return get(id).str; }
bool isSetByUser(Id id) { return get(id).fromEnv; }

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
  std::string out = "| Variable | Type | Default | Meaning |\n|---|---|---|---|\n";
  auto cell = [](std::string s) {  // a '|' inside help text would split the Markdown cell
    for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
    return s;
  };
  for (const Info& p : table()) {
    out += std::string("| `") + p.name + "` | " + typeName(p.type) + " | `" + p.defaultValue + "` | " + cell(p.help) +
           " |\n";
  }
  return out;
}

}  // namespace icn::params
