// Small helpers shared by the scale-up probes: option parsing, a tiny JSON writer, statistics.
#pragma once
#include <cstddef>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace icnprobe {

// "--name value" / "--name=value" options; unknown options are an error.
class Options {
 public:
  Options(std::string tool, std::string summary) : tool_(std::move(tool)), summary_(std::move(summary)) {}
  void add(const std::string& name, std::string def, std::string help);
  // Returns false (after printing why, or the help) when the program should exit; *exitCode says how.
  bool parse(int argc, char** argv, int* exitCode);
  const std::string& str(const std::string& name) const { return values_.at(name); }
  long long integer(const std::string& name) const;
  size_t size(const std::string& name) const;  // K/M/G suffixes (binary)

 private:
  struct Opt { std::string def, help; };
  std::string tool_, summary_;
  std::vector<std::string> order_;
  std::map<std::string, Opt> opts_;
  std::map<std::string, std::string> values_;
};

bool parseSize(const std::string& text, size_t* out);
std::vector<int> parseIntList(const std::string& text);  // "0,2,3" or "0-3"; empty = all
double percentile(std::vector<double> v, double p);
std::string jsonEscape(const std::string& s);

// Writes the file only when the path is non-empty; returns false with a message on failure.
bool writeTextFile(const std::string& path, const std::string& text);

}  // namespace icnprobe
