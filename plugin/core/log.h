// Logging through NCCL's logger when NCCL gave us one, stderr otherwise (tools, tests).
// The sink has NCCL's logger signature but the core only knows it as a plain C function pointer.
#pragma once
#include <cstdarg>

namespace icn {

enum class LogLevel : int { Warn = 2, Info = 3, Trace = 5 };

// Subsystem bits, numerically equal to NCCL's so the adapter can forward them untouched.
namespace subsys {
constexpr unsigned long Init = 0x1;
constexpr unsigned long Net = 0x10;
constexpr unsigned long Graph = 0x20;
constexpr unsigned long Tuning = 0x40;
constexpr unsigned long Env = 0x80;
constexpr unsigned long Profile = 0x4000;
}  // namespace subsys

using LogSink = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// Installs NCCL's logger (idempotent; the first non-null sink wins so every comm logs the same way).
void setLogSink(LogSink sink);
bool hasLogSink();
void logf(LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace icn

#define ICN_WARN(flags, ...) ::icn::logf(::icn::LogLevel::Warn, (flags), __FILE__, __LINE__, __VA_ARGS__)
#define ICN_INFO(flags, ...) ::icn::logf(::icn::LogLevel::Info, (flags), __FILE__, __LINE__, __VA_ARGS__)
#define ICN_TRACE(flags, ...) ::icn::logf(::icn::LogLevel::Trace, (flags), __FILE__, __LINE__, __VA_ARGS__)
