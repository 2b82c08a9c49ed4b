// Built only with PYNENC_CPP_PORTABLE (bindings/CMakeLists.txt): keeps the portable
// _core within the glibc symbol versions of its manylinux tag.
//
// The static libstdc++ of GCC 12, built on glibc 2.36, draws std::random_device's
// bytes from arc4random (GLIBC_2.36). The link wraps that one reference
// (-Wl,--wrap=arc4random) to this function, which reads the same kernel source
// through getrandom(2) (GLIBC_2.25): _core then loads on glibc 2.34 and 2.35 too.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

extern "C" std::uint32_t __wrap_arc4random(void) {
  std::uint32_t value = 0;
  for (;;) {
    const ssize_t n = getrandom(&value, sizeof value, 0);
    if (n == static_cast<ssize_t>(sizeof value)) return value;
    // EINTR: interrupted before any byte; a short read cannot happen for 4 bytes.
    // Anything else means no kernel entropy interface at all: arc4random itself
    // aborts the process in that case, and so do we.
    if (n < 0 && errno == EINTR) continue;
    std::abort();
  }
}
