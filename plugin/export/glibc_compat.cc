// The statically linked libstdc++ (static so the plugin loads beside any C++ runtime) references glibc
// 2.36's arc4random from std::random_device. Defining it here, hidden, binds that reference inside the
// library, so the plugin needs nothing newer than glibc 2.35 (Ubuntu 22.04, most NGC images).
#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void) {
  uint32_t v = 0;
  auto* p = reinterpret_cast<unsigned char*>(&v);
  size_t got = 0;
  while (got < sizeof v) {
    ssize_t r = getrandom(p + got, sizeof v - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno != EINTR) {
      // No entropy source at all: as glibc's arc4random, never return predictable values.
      abort();
    }
  }
  return v;
}
