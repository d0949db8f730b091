// NCCL sizes its channels per NIC it sees (one NIC with one GPU per node: 2 channels). A device that stripes over
// several rails is one NIC to NCCL, so a job over two rails gets half the channels NCCL gives two NICs, and each
// channel's pipeline, not the rails, bounds its bandwidth of large messages. At init, before NCCL reads
// NCCL_MIN_NCHANNELS for its first communicator, ICN sets it to ICN_TCP_CHANNELS_PER_RAIL per rail of its widest
// device, unless the job chose the channel count itself. Off by default: more channels cut mid-sized collectives
// into more, smaller messages, which costs all_reduce of 64 KiB-1 MiB more than large messages gain.
#pragma once
#include <functional>
#include <string>

namespace icn::adapters {

// The variables with which a job chooses NCCL's channel count; any of them set means ICN leaves the count alone.
inline constexpr const char* kNcclChannelVars[] = {"NCCL_MIN_NCHANNELS", "NCCL_MIN_NRINGS", "NCCL_MAX_NCHANNELS",
                                                    "NCCL_MAX_NRINGS"};

struct ChannelAsk {
  int minChannels = 0;    // the value for NCCL_MIN_NCHANNELS; 0: none
  std::string reason;     // why (asked or not), for the log
};

// The rule: widestRails (the most rails one device spans) x perRail, when the device spans two or more rails,
// perRail > 0 and lookup (getenv) finds none of kNcclChannelVars set. Capped at NCCL's 64 channels.
ChannelAsk decideChannelAsk(int widestRails, int perRail, const std::function<const char*(const char*)>& lookup);

// Applies the rule to this process's environment (once per process) and logs the outcome at INFO.
void askNcclForChannels(int widestRails, const std::string& device);

}  // namespace icn::adapters
