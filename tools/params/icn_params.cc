// Prints the ICN_* settings with the values this environment would use; --markdown: the settings table of the
// README; --wire-limits: the TCP transport's wire limits as the docs show them.
#include <cstdio>
#include <cstring>

#include "core/params.h"
#include "transport/tcp/tcp_wire.h"

int main(int argc, char** argv) {
  if (argc > 1 && !strcmp(argv[1], "--markdown")) {
    fputs(icn::params::markdownTable().c_str(), stdout);
    return 0;
  }
  if (argc > 1 && !strcmp(argv[1], "--wire-limits")) {
    fputs(icn::tcp::wireLimitsMarkdown().c_str(), stdout);
    return 0;
  }
  for (const auto& p : icn::params::table())
    printf("%-28s %s%s\n", p.name, icn::params::displayValue(p.id).c_str(),
           icn::params::isSetByUser(p.id) ? "  (from environment)" : "");
  return 0;
}
