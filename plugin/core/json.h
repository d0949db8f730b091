// Minimal JSON reader/writer for our own small files (heatmap snapshots, recorded facts, show --json).
// Bounded: depth and size limits, never throws, reports the byte offset of the first error.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace icn::json {

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Value> arr;
  std::vector<std::pair<std::string, Value>> obj;  // keeps file order

  // Out of line (json.cc), where Value is complete: clang rejects instantiating the members' special
  // functions while Value is still incomplete (std::pair<std::string, Value> needs a complete Value).
  Value();
  ~Value();
  Value(const Value&);
  Value(Value&&) noexcept;
  Value& operator=(const Value&);
  Value& operator=(Value&&) noexcept;

  const Value* get(const std::string& key) const;  // nullptr when absent or not an object
  bool isObject() const { return kind == Kind::Object; }
  bool isArray() const { return kind == Kind::Array; }
  bool isNumber() const { return kind == Kind::Number; }
  bool isString() const { return kind == Kind::String; }
  // Typed lookups with defaults (wrong type = default).
  double number(const std::string& key, double def = 0) const;
  std::string string(const std::string& key, const std::string& def = "") const;
};

// Parses text; on failure returns false and sets err ("offset N: what").
bool parse(const std::string& text, Value& out, std::string& err);
bool parseFile(const std::string& path, Value& out, std::string& err);

// String escaping for writers.
std::string quote(const std::string& s);
// A JSON number with `digits` significant digits; NaN and infinities (no JSON form) are written as 0.
std::string number(double v, int digits = 9);

}  // namespace icn::json
