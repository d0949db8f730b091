// Collects the core's log lines in-process so tests can assert that a rejection was explained.
#pragma once
#include <string>
#include <vector>

namespace icn::testing {

// Installs the capturing sink (first call wins for the whole process, like NCCL's logger).
void installLogCapture();
std::vector<std::string> takeWarnings();  // returns and clears the WARN lines seen so far
std::vector<std::string> takeInfos();     // the same for INFO lines (at most 4096 are kept between takes)
// True when one WARN line contains every needle.
bool warned(const std::vector<std::string>& lines, std::initializer_list<const char*> needles);

// Sets (or with nullptr unsets) an environment variable and makes params/auth re-read it.
void setEnvAndReload(const char* name, const char* value);

}  // namespace icn::testing
