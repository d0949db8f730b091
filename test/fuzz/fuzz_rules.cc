// libFuzzer harness for the tuner's rules-file parser (ICN_TUNER_RULES / NCCL_TUNER_CONFIG_FILE): any text
// must parse or be refused with a located reason; what parses must compile into a rule table and answer
// lookups without fault.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/log.h"
#include "tuner/store/rules.h"

namespace {
void quietSink(int, unsigned long, const char*, int, const char*, ...) {}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  icn::setLogSink(&quietSink);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<icn::tuner::Rule> rules;
  std::string why;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  icn::Status st = icn::tuner::parseRules(text, "fuzz.csv", &rules, &why);
  if (st != icn::Status::Ok) {
    if (why.rfind("fuzz.csv", 0) != 0) abort();  // every refusal names the file (and line)
    return 0;
  }
  for (int nRanks : {1, 2, 8, 1024}) {
    icn::tuner::RuleTable t;
    t.build(rules, nRanks, nRanks > 1 ? 2 : 1);
    for (int coll = -1; coll < 8; coll++)
      for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{1} << 30, UINT64_MAX})
        t.match(coll, bytes, 1, 0);
  }
  return 0;
}
