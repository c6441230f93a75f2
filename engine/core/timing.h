// Wall-clock intervals on the monotonic clock, the one way the engine times its phases and steps.
#pragma once

#include <chrono>

namespace lathe {

using Clock = std::chrono::steady_clock;

/// Seconds from `t0` until now.
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace lathe
