// Typed access to the ICN_* settings table (params.def).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace icn::params {

enum class Type { Bool, Int, IntOrZero, String, Enum, Secret };

enum class Id : int {
#define ICN_PARAM(id, name, type, def, lo, hi, help) id,
#include "core/params.def"
#undef ICN_PARAM
  Count
};

struct Info {
  Id id;
  const char* name;
  Type type;
  const char* defaultValue;
  int64_t min;  // Int, IntOrZero: the bounds (IntOrZero also takes 0); Bool: 0 and 1; others: 0 and 0
  int64_t max;
  const char* help;
};

namespace detail {
inline constexpr int64_t kMin[] = {
#define ICN_PARAM(id, name, type, def, lo, hi, help) lo,
#include "core/params.def"
#undef ICN_PARAM
};
inline constexpr int64_t kMax[] = {
#define ICN_PARAM(id, name, type, def, lo, hi, help) hi,
#include "core/params.def"
#undef ICN_PARAM
};
}  // namespace detail

// A setting's bounds, at compile time: a use site static_asserts what it relies on (a wire limit, a bit field)
// instead of clamping what it reads.
constexpr int64_t minOf(Id id) { return detail::kMin[static_cast<int>(id)]; }
constexpr int64_t maxOf(Id id) { return detail::kMax[static_cast<int>(id)]; }
// The range as the README shows it: "1..4096", "0, or 4..32", "0/1"; empty for the string types.
std::string rangeText(Id id);

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
