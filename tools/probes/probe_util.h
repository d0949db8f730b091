// Small helpers shared by the scale-up probes: option parsing, the options every probe takes, a tiny JSON writer,
// statistics. Plain C++, so test/probes checks them without a GPU.
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

// The options every probe takes (--size, --iters, --devices, --json) beside its own, read and checked.
class ProbeCli {
 public:
  ProbeCli(const std::string& tool, const std::string& summary, const std::string& sizeHelp,
           const std::string& itersDefault);
  Options& options() { return opt_; }  // for the probe's own options
  const std::string& tool() const { return tool_; }
  // Parses argv and checks the common values; the size is rounded down to a multiple of sizeAlign. False when the
  // program should exit with *exitCode: 0 after --help, 2 after a bad argument (why is printed).
  bool parse(int argc, char** argv, size_t sizeAlign, int* exitCode);
  // Writes {"tool":...,"size":...,"iters":...<fields>} to the --json file, when one was given.
  bool writeReport(const std::string& fields) const;

  size_t size = 0;
  int iters = 0;
  std::vector<int> devices;  // as given; empty: every device
  std::string json;

 private:
  std::string tool_;
  Options opt_;
};

// Appends one printf-formatted item to a JSON list's body, after a comma unless it is the first.
void appendJsonItem(std::string& list, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

bool parseSize(const std::string& text, size_t* out);
std::vector<int> parseIntList(const std::string& text);  // "0,2,3" or "0-3"; empty = all
double percentile(std::vector<double> v, double p);
std::string jsonEscape(const std::string& s);

// Writes the file only when the path is non-empty; returns false with a message on failure.
bool writeTextFile(const std::string& path, const std::string& text);

}  // namespace icnprobe
