// Typed access to the ICN_* settings table (params.def).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace icn::params {

enum class Type { Bool, Int, String, Enum, Secret };

enum class Id : int {
#define ICN_PARAM(id, name, type, def, help) id,
#include "core/params.def"
#undef ICN_PARAM
  Count
};

struct Info {
  Id id;
  const char* name;
  Type type;
  const char* defaultValue;
  const char* help;
};

const std::vector<Info>& table();

int64_t getInt(Id id);
bool getBool(Id id);
const std::string& getString(Id id);  // String, Enum and Secret
// The value as it may be shown (logs, icn-params): a Secret reads `<set, N bytes>` (or "" when unset).
std::string displayValue(Id id);
bool isSetByUser(Id id);
// The environment's value now rather than at first use, for settings read once per communicator (ICN_TUNER,
// ICN_TUNER_CACHE), so one process can run communicators in different modes. String and Enum only.
std::string getStringNow(Id id);

// Logs every setting (value and origin) once per process at INFO/INIT.
void logOnce();
// Re-reads the environment (tests only; not thread-safe against concurrent readers).
void reloadForTesting();
// Markdown table for the README.
std::string markdownTable();

}  // namespace icn::params
