// A small JSON reader for our own snapshot files (tools and tests read the heatmap back with it).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace icn::json {

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Value> arr;
  std::map<std::string, Value> obj;

  const Value* get(const std::string& key) const;  // nullptr when absent or not an object
  double numOr(const std::string& key, double def) const;
  std::string strOr(const std::string& key, const std::string& def) const;
};

// False with *why ("offset N: ...") on malformed input. Nesting is limited to 64 levels.
bool parse(std::string_view text, Value* out, std::string* why);

}  // namespace icn::json
