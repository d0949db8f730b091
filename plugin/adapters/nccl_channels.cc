#include "adapters/nccl_channels.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "core/log.h"
#include "core/params.h"

namespace icn::adapters {

namespace {
constexpr int kNcclMaxChannels = 64;  // NCCL's MAXCHANNELS: it limits larger minimums itself, with a notice
}  // namespace

ChannelAsk decideChannelAsk(int widestRails, int perRail, const std::function<const char*(const char*)>& lookup) {
  ChannelAsk a;
  if (widestRails < 2) {
    a.reason = "one rail per device";
    return a;
  }
  if (perRail <= 0) {
    a.reason = "ICN_TCP_CHANNELS_PER_RAIL=0";
    return a;
  }
  for (const char* var : kNcclChannelVars) {
    const char* v = lookup(var);
    if (v && *v) {
      a.reason = std::string(var) + "=" + v + " set by the job";
      return a;
    }
  }
  a.minChannels = std::min(widestRails * perRail, kNcclMaxChannels);
  a.reason = std::to_string(widestRails) + " rails x " + std::to_string(perRail) + " channels per rail";
  return a;
}

void askNcclForChannels(int widestRails, const std::string& device) {
  static std::once_flag once;
  std::call_once(once, [&] {
    if (widestRails < 2) return;  // nothing to ask or say for single-rail devices
    const int perRail = static_cast<int>(params::getInt(params::Id::TcpChannelsPerRail));
    const ChannelAsk a = decideChannelAsk(widestRails, perRail, [](const char* n) { return std::getenv(n); });
    if (a.minChannels == 0) {
      ICN_INFO(subsys::Net | subsys::Init,
               "device %s spans %d rails; NCCL's channel count left as it is (%s; ICN_TCP_CHANNELS_PER_RAIL=2 asks "
               "for the channels NCCL gives separate NICs, for jobs of large messages)",
               device.c_str(), widestRails, a.reason.c_str());
      return;
    }
    // setenv is not safe against a concurrent getenv in another thread; this runs once, in NCCL's first
    // communicator init, before it starts the threads of that communicator.
    const std::string value = std::to_string(a.minChannels);
    setenv("NCCL_MIN_NCHANNELS", value.c_str(), 0);
    ICN_INFO(subsys::Net | subsys::Init | subsys::Env,
             "device %s spans %d rails: NCCL_MIN_NCHANNELS=%s (%s, as NCCL gives separate NICs; "
             "ICN_TCP_CHANNELS_PER_RAIL=0 or any NCCL_MIN/MAX_NCHANNELS leaves NCCL's count)",
             device.c_str(), widestRails, value.c_str(), a.reason.c_str());
  });
}

}  // namespace icn::adapters
