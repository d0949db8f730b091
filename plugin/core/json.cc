#include "core/json.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace icn::json {

Value::Value() = default;
Value::~Value() = default;
Value::Value(const Value&) = default;
Value::Value(Value&&) noexcept = default;
Value& Value::operator=(const Value&) = default;
Value& Value::operator=(Value&&) noexcept = default;
namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxText = 256u << 20;  // heatmaps of big jobs stay far below this

struct Parser {
  const std::string& s;
  size_t i = 0;
  std::string err;

  bool fail(const char* what) {
    if (err.empty()) err = "offset " + std::to_string(i) + ": " + what;
    return false;
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
  }
  bool lit(const char* w) {
    size_t n = strlen(w);
    if (s.compare(i, n, w) != 0) return fail("unexpected token");
    i += n;
    return true;
  }
  bool hex4(unsigned& v) {
    if (i + 4 > s.size()) return fail("short \\u escape");
    v = 0;
    for (int k = 0; k < 4; k++) {
      char c = s[i++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return fail("bad \\u escape");
    }
    return true;
  }
  static void utf8(std::string& o, unsigned cp) {
    if (cp < 0x80) o += static_cast<char>(cp);
    else if (cp < 0x800) { o += static_cast<char>(0xc0 | (cp >> 6)); o += static_cast<char>(0x80 | (cp & 0x3f)); }
    else if (cp < 0x10000) {
      o += static_cast<char>(0xe0 | (cp >> 12));
      o += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      o += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      o += static_cast<char>(0xf0 | (cp >> 18));
      o += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      o += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      o += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  bool str(std::string& o) {
    if (s[i] != '"') return fail("expected string");
    i++;
    while (true) {
      if (i >= s.size()) return fail("unterminated string");
      char c = s[i++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in string");
      if (c != '\\') { o += c; continue; }
      if (i >= s.size()) return fail("unterminated escape");
      char e = s[i++];
      switch (e) {
        case '"': o += '"'; break;
        case '\\': o += '\\'; break;
        case '/': o += '/'; break;
        case 'b': o += '\b'; break;
        case 'f': o += '\f'; break;
        case 'n': o += '\n'; break;
        case 'r': o += '\r'; break;
        case 't': o += '\t'; break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xd800 && cp < 0xdc00 && i + 1 < s.size() && s[i] == '\\' && s[i + 1] == 'u') {
            i += 2;
            unsigned lo = 0;
            if (!hex4(lo)) return false;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          utf8(o, cp);
          break;
        }
        default: return fail("bad escape");
      }
    }
  }
  bool number(double& v) {
    size_t start = i;
    if (s[i] == '-') i++;
    while (i < s.size() && (isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == 'e' ||
                            s[i] == 'E' || s[i] == '+' || s[i] == '-'))
      i++;
    std::string t = s.substr(start, i - start);
    char* end = nullptr;
    v = strtod(t.c_str(), &end);
    if (t.empty() || *end != '\0' || !std::isfinite(v)) { i = start; return fail("bad number"); }
    return true;
  }
  bool value(Value& v, int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    ws();
    if (i >= s.size()) return fail("unexpected end");
    char c = s[i];
    if (c == '{') {
      v.kind = Value::Kind::Object;
      i++;
      ws();
      if (i < s.size() && s[i] == '}') { i++; return true; }
      while (true) {
        ws();
        if (i >= s.size()) return fail("unterminated object");
        std::string k;
        if (!str(k)) return false;
        ws();
        if (i >= s.size() || s[i] != ':') return fail("expected ':'");
        i++;
        Value child;
        if (!value(child, depth + 1)) return false;
        v.obj.emplace_back(std::move(k), std::move(child));
        ws();
        if (i < s.size() && s[i] == ',') { i++; continue; }
        if (i < s.size() && s[i] == '}') { i++; return true; }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = Value::Kind::Array;
      i++;
      ws();
      if (i < s.size() && s[i] == ']') { i++; return true; }
      while (true) {
        Value child;
        if (!value(child, depth + 1)) return false;
        v.arr.push_back(std::move(child));
        ws();
        if (i < s.size() && s[i] == ',') { i++; continue; }
        if (i < s.size() && s[i] == ']') { i++; return true; }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') { v.kind = Value::Kind::String; return str(v.str); }
    if (c == 't') { v.kind = Value::Kind::Bool; v.b = true; return lit("true"); }
    if (c == 'f') { v.kind = Value::Kind::Bool; v.b = false; return lit("false"); }
    if (c == 'n') { v.kind = Value::Kind::Null; return lit("null"); }
    v.kind = Value::Kind::Number;
    return number(v.num);
  }
};

}  // namespace

const Value* Value::get(const std::string& key) const {
  if (kind != Kind::Object) return nullptr;
  for (const auto& [k, v] : obj)
    if (k == key) return &v;
  return nullptr;
}

double Value::number(const std::string& key, double def) const {
  const Value* v = get(key);
  return v && v->kind == Kind::Number ? v->num : def;
}

std::string Value::string(const std::string& key, const std::string& def) const {
  const Value* v = get(key);
  return v && v->kind == Kind::String ? v->str : def;
}

bool parse(const std::string& text, Value& out, std::string& err) {
  if (text.size() > kMaxText) {
    err = "document too large";
    return false;
  }
  Parser p{text, 0, {}};
  out = Value{};
  if (!p.value(out, 0)) {
    err = p.err;
    return false;
  }
  p.ws();
  if (p.i != text.size()) {
    err = "offset " + std::to_string(p.i) + ": trailing characters";
    return false;
  }
  return true;
}

bool parseFile(const std::string& path, Value& out, std::string& err) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    err = "cannot open " + path;
    return false;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  if (!parse(ss.str(), out, err)) {
    err = path + ": " + err;
    return false;
  }
  return true;
}

std::string number(double v, int digits) {
  char b[40];
  snprintf(b, sizeof b, "%.*g", digits, std::isfinite(v) ? v : 0.0);
  return b;
}

std::string quote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += static_cast<char>(c);
        }
    }
  }
  return o + "\"";
}

}  // namespace icn::json
