// Wall-clock intervals on the monotonic clock, the one way the engine times its phases and steps;
// and the calling thread's CPU time, for benches that must read a loaded machine (with one thread,
// the work itself: time the thread spent descheduled is not counted).
#pragma once

#include <time.h>

#include <chrono>

namespace lathe {

using Clock = std::chrono::steady_clock;

/// Seconds from `t0` until now.
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// CPU seconds the calling thread has used (CLOCK_THREAD_CPUTIME_ID).
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace lathe
