// Forked test processes leave through _exit, which skips LeakSanitizer's check at exit. A child that ran our code
// passes its exit status through childExitStatus() last: in an ASan build with leak detection on
// (ASAN_OPTIONS=detect_leaks=1, as .ci/sanitize.sh runs), leaks found there are printed and turn a clean exit into
// LeakSanitizer's own exit code 23.
#pragma once

#include <dlfcn.h>

#if defined(__SANITIZE_ADDRESS__)
#define ICN_TEST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ICN_TEST_LSAN 1
#endif
#endif
#ifdef ICN_TEST_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace icn::test {

inline constexpr int kLeakExitStatus = 23;

// dlopen flag for a test that dlcloses what it loaded: with leak detection the image stays mapped (RTLD_NODELETE),
// so what its globals still hold is not reported as leaked and leaks keep their symbols.
#ifdef ICN_TEST_LSAN
inline constexpr int kKeepImageForLeakCheck = RTLD_NODELETE;
#else
inline constexpr int kKeepImageForLeakCheck = 0;
#endif

inline int childExitStatus(int status) {
#ifdef ICN_TEST_LSAN
  if (status == 0 && __lsan_do_recoverable_leak_check() != 0) return kLeakExitStatus;
#endif
  return status;
}

// While one is alive, what this thread allocates is never reported as leaked (LeakSanitizer's own disabler).
class LeakCheckDisabled {
 public:
#ifdef ICN_TEST_LSAN
  LeakCheckDisabled() { __lsan_disable(); }
  ~LeakCheckDisabled() { __lsan_enable(); }
#else
  LeakCheckDisabled() {}  // user-provided: a guard variable is not "unused"
  ~LeakCheckDisabled() {}
#endif
  LeakCheckDisabled(const LeakCheckDisabled&) = delete;
  LeakCheckDisabled& operator=(const LeakCheckDisabled&) = delete;
};

}  // namespace icn::test
