// icn-tuner-dump: prints the decision table the tuner would apply for a communicator shape, from a learned cache
// (ICN_TUNER_CACHE) or a rules file (NCCL example-tuner CSV).
//   icn-tuner-dump (--cache FILE | --rules FILE) --nranks N [--nnodes M] [--coll NAME] [--pipeops K] [--regbuff R]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "telemetry/coll_names.h"
#include "tuner/store/cache.h"
#include "tuner/store/rules.h"

using namespace icn;
using namespace icn::tuner;

namespace {

std::string human(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) b /= 1024, ++i;
  char buf[32];
  snprintf(buf, sizeof buf, "%g %s", b, u[i]);
  return buf;
}

int usage() {
  fprintf(stderr,
          "usage: icn-tuner-dump (--cache FILE | --rules FILE) --nranks N [--nnodes M] [--coll NAME]\n"
          "                      [--pipeops K] [--regbuff 0|1]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cache, rules;
  int nRanks = -1, nNodes = 1, onlyColl = -1, pipeOps = 1, regBuff = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--cache" && (v = next())) cache = v;
    else if (a == "--rules" && (v = next())) rules = v;
    else if (a == "--nranks" && (v = next())) nRanks = atoi(v);
    else if (a == "--nnodes" && (v = next())) nNodes = atoi(v);
    else if (a == "--pipeops" && (v = next())) pipeOps = atoi(v);
    else if (a == "--regbuff" && (v = next())) regBuff = atoi(v);
    else if (a == "--coll" && (v = next())) {
      if ((onlyColl = coll::parseColl(v)) < 0) {
        fprintf(stderr, "icn-tuner-dump: unknown collective '%s'\n", v);
        return 2;
      }
    } else return usage();
  }
  if ((cache.empty() == rules.empty()) || nRanks < 1 || nNodes < 1) return usage();
  std::string why;
  char d[48];
  if (!cache.empty()) {
    std::vector<CacheEntry> entries;
    if (loadCache(cache, &entries, &why) != Status::Ok) {
      fprintf(stderr, "icn-tuner-dump: %s\n", why.c_str());
      return 1;
    }
    printf("# %s: learned decisions for nRanks=%d nNodes=%d\n", cache.c_str(), nRanks, nNodes);
    printf("%-14s %-22s %-22s %10s %8s\n", "collective", "size", "decision", "median us", "samples");
    int shown = 0;
    for (int c = 0; c < coll::kNumColls; ++c)
      for (int b = 0; b < coll::kNumBuckets; ++b)
        for (const CacheEntry& e : entries)
          if (e.coll == c && e.bucket == b && e.nRanks == nRanks && e.nNodes == nNodes &&
              (onlyColl < 0 || onlyColl == c)) {
            std::string range = human(std::ldexp(1.0, b)) + " - " + human(std::ldexp(1.0, b + 1) - 1);
            printf("%-14s %-22s %-22s %10.2f %8llu\n", coll::collName(c), range.c_str(),
                   describe(e.decision, d, sizeof d), e.meanUs, static_cast<unsigned long long>(e.samples));
            ++shown;
          }
    if (!shown) printf("(no entries for this shape; %zu entries in the file)\n", entries.size());
    return 0;
  }
  std::vector<Rule> parsed;
  if (loadRulesFile(rules, &parsed, &why) != Status::Ok) {
    fprintf(stderr, "icn-tuner-dump: %s\n", why.c_str());
    return 1;
  }
  RuleTable table;
  table.build(parsed, nRanks, nNodes);
  printf("# %s: %zu of %zu rules apply to nRanks=%d nNodes=%d (numPipeOps=%d regBuff=%d; sizes sampled at powers of 2)\n", rules.c_str(),
         table.size(), parsed.size(), nRanks, nNodes, pipeOps, regBuff);
  printf("%-14s %-22s %-22s %s\n", "collective", "size", "decision", "rule line");
  for (int c = 0; c < coll::kNumColls; ++c) {
    if (onlyColl >= 0 && onlyColl != c) continue;
    // Walk the size axis and print one line per run of buckets that resolve to the same rule.
    int runStart = 0, runLine = -2;
    Decision runD;
    auto flush = [&](int endBucket) {
      if (runLine == -2) return;
      std::string range = human(std::ldexp(1.0, runStart)) + " - " + human(std::ldexp(1.0, endBucket) - 1);
      if (runLine >= 0)
        printf("%-14s %-22s %-22s %d\n", coll::collName(c), range.c_str(), describe(runD, d, sizeof d), runLine);
    };
    for (int b = 0; b < coll::kNumBuckets; ++b) {
      const Rule* r = table.match(c, uint64_t{1} << b, pipeOps, regBuff);
      int line = r ? r->line : -1;
      if (line != runLine) {
        flush(b);
        runStart = b;
        runLine = line;
        runD = r ? r->decision : Decision{};
      }
    }
    flush(coll::kNumBuckets);
  }
  return 0;
}
