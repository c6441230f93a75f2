// Device telemetry for the device/* and mem/* metrics. CPU utilisation is process CPU time over
// wall time over cores (1.0 = every core busy); GPU utilisation comes from NVML, loaded at run time.
// The peak FLOP/s for MFU is measured once on the CPU (an SGEMM through oneDNN) or taken from the
// price catalog's datasheet figures for GPUs, and says which.
#pragma once

#include <cstdint>
#include <string>

namespace lathe {

class CpuUtilMeter {
 public:
  CpuUtilMeter();
  /// Utilisation since the last call (or construction), in [0, 1] of all usable cores.
  double sample();
  int cores() const { return m_cores; }

 private:
  double m_last_cpu_s, m_last_wall_s;
  int m_cores;
};

/// How busy the rest of the machine is while this process measures something: the CPU time
/// every process spent (/proc/stat) minus this process's own, as a share of all online cores.
/// A share above kContendedShare marks a measurement as taken under contention.
class LoadMeter {
 public:
  LoadMeter();  ///< starts the window
  /// Other processes' CPU share since construction, in [0, 1]; NaN where /proc/stat is unreadable.
  double others_share() const;

 private:
  double m_busy_s, m_own_s, m_wall_s;
};
constexpr double kContendedShare = 0.2;
/// CPU seconds all processes have spent since boot (/proc/stat: everything but idle and iowait); NaN if unreadable.
double machine_busy_cpu_seconds();

/// Peak resident set of this process, in bytes (getrusage).
int64_t process_peak_rss_bytes();
double process_cpu_seconds();
/// Cores this process may run on (sched_getaffinity).
int usable_cores();

struct PeakFlops {
  double flops_per_s = 0;
  std::string how;  // "measured: oneDNN SGEMM 2048^3 on 2 threads" or "datasheet: ..."
};

/// Measures f32 peak on this CPU with `threads` threads: the best of a few large SGEMMs (~0.3 s).
PeakFlops measure_cpu_peak_flops(int threads);

/// The peak used for MFU: this run's measurement or, when higher, the best one recorded on this
/// machine for the same CPU model and thread count (a measurement taken while other work shares
/// the cores comes out low, which would inflate MFU). Records in $XDG_CACHE_HOME/lathe/peak_flops.json
/// (default ~/.cache/lathe); without a writable cache it is this run's measurement alone.
PeakFlops cpu_peak_flops(int threads);

}  // namespace lathe
