#include "telemetry/json.h"

#include <cstdlib>

namespace icn::json {
namespace {

struct Parser {
  std::string_view s;
  size_t i = 0;
  std::string err;

  bool fail(const std::string& m) {
    if (err.empty()) err = "offset " + std::to_string(i) + ": " + m;
    return false;
  }
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  }
  bool lit(std::string_view l) {
    if (s.substr(i, l.size()) != l) return false;
    i += l.size();
    return true;
  }
  bool str(std::string* out) {
    if (i >= s.size() || s[i] != '"') return fail("expected string");
    ++i;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (i >= s.size()) return fail("bad escape");
      char e = s[i++];
      switch (e) {
        case 'n': *out += '\n'; break;
        case 't': *out += '\t'; break;
        case 'r': *out += '\r'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'u': {
          if (i + 4 > s.size()) return fail("bad \\u escape");
          unsigned v = static_cast<unsigned>(strtoul(std::string(s.substr(i, 4)).c_str(), nullptr, 16));
          i += 4;
          if (v < 0x80) {
            *out += static_cast<char>(v);
          } else if (v < 0x800) {
            *out += static_cast<char>(0xC0 | (v >> 6));
            *out += static_cast<char>(0x80 | (v & 0x3F));
          } else {
            *out += static_cast<char>(0xE0 | (v >> 12));
            *out += static_cast<char>(0x80 | ((v >> 6) & 0x3F));
            *out += static_cast<char>(0x80 | (v & 0x3F));
          }
          break;
        }
        default: *out += e;
      }
    }
    if (i >= s.size()) return fail("unterminated string");
    ++i;
    return true;
  }
  bool value(Value* v, int depth) {
    if (depth > 64) return fail("nesting too deep");
    ws();
    if (i >= s.size()) return fail("unexpected end");
    char c = s[i];
    if (c == '{') {
      v->kind = Value::Kind::Object;
      ++i;
      ws();
      if (i < s.size() && s[i] == '}') return ++i, true;
      for (;;) {
        ws();
        std::string key;
        if (!str(&key)) return false;
        ws();
        if (i >= s.size() || s[i] != ':') return fail("expected ':'");
        ++i;
        if (!value(&v->obj[key], depth + 1)) return false;
        ws();
        if (i < s.size() && s[i] == ',') { ++i; continue; }
        if (i < s.size() && s[i] == '}') return ++i, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v->kind = Value::Kind::Array;
      ++i;
      ws();
      if (i < s.size() && s[i] == ']') return ++i, true;
      for (;;) {
        v->arr.emplace_back();
        if (!value(&v->arr.back(), depth + 1)) return false;
        ws();
        if (i < s.size() && s[i] == ',') { ++i; continue; }
        if (i < s.size() && s[i] == ']') return ++i, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v->kind = Value::Kind::String;
      return str(&v->str);
    }
    if (lit("true")) { v->kind = Value::Kind::Bool; v->b = true; return true; }
    if (lit("false")) { v->kind = Value::Kind::Bool; v->b = false; return true; }
    if (lit("null")) { v->kind = Value::Kind::Null; return true; }
    std::string num;
    while (i < s.size() && (isdigit(static_cast<unsigned char>(s[i])) || s[i] == '-' || s[i] == '+' || s[i] == '.' ||
                            s[i] == 'e' || s[i] == 'E'))
      num += s[i++];
    if (num.empty()) return fail("unexpected character");
    char* end = nullptr;
    v->kind = Value::Kind::Number;
    v->num = strtod(num.c_str(), &end);
    if (*end != '\0') return fail("bad number '" + num + "'");
    return true;
  }
};

}  // namespace

const Value* Value::get(const std::string& key) const {
  if (kind != Kind::Object) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &it->second;
}

double Value::numOr(const std::string& key, double def) const {
  const Value* v = get(key);
  return v && v->kind == Kind::Number ? v->num : def;
}

std::string Value::strOr(const std::string& key, const std::string& def) const {
  const Value* v = get(key);
  return v && v->kind == Kind::String ? v->str : def;
}

bool parse(std::string_view text, Value* out, std::string* why) {
  Parser p{text, 0, {}};
  *out = Value{};
  bool ok = p.value(out, 0);
  if (ok) {
    p.ws();
    if (p.i != text.size()) ok = p.fail("trailing characters");
  }
  if (!ok && why) *why = p.err;
  return ok;
}

}  // namespace icn::json
