// Names the calling thread for the OS (top -H, /proc/<pid>/task/*/comm, perf,
// gdb), so a profile tells the engine's threads from Python's. Linux keeps at
// most 15 characters; elsewhere this does nothing.
#pragma once

#if defined(__linux__)
#include <pthread.h>
#endif

namespace pynenc_cpp {

inline void NameThisThread(const char* name) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name);  // a longer name is refused, not cut
#else
  (void)name;
#endif
}

}  // namespace pynenc_cpp
