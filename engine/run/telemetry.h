// Device telemetry for the device/* and mem/* metrics. CPU utilisation is process CPU time over
// wall time over cores (1.0 = every core busy); GPU utilisation comes from NVML, loaded at run time.
// The peak FLOP/s for MFU is measured once on the CPU (an SGEMM through oneDNN) or taken from the
// price catalog's datasheet figures for GPUs, and says which.
#pragma once

#include <cstdint>
#include <string>

#include "engine/core/dtype.h"

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

/// Measures the dense-matmul peak at `dtype` with `threads` threads, as operations (2 x multiply-
/// adds) per second: f32 is the SGEMM above; bf16 a oneDNN bf16 x bf16 -> f32 matmul (AMX/AVX512-BF16);
/// s8 a oneDNN u8 x s8 -> s32 matmul (AMX/VNNI). Best of a few 2048^3 products. Throws for other dtypes.
PeakFlops measure_cpu_peak_ops(int threads, DType dtype);

/// The peak used for MFU: this run's measurement or, when higher, the best one recorded on this
/// machine for the same CPU model, thread count and dtype (a measurement taken while other work
/// shares the cores comes out low, which would inflate MFU). Records in
/// $XDG_CACHE_HOME/lathe/peak_flops.json (default ~/.cache/lathe; keys "<cpu> x<threads>" for f32, as
/// before, and "<cpu> x<threads> bf16" / "... int8"); without a writable cache it is this run's
/// measurement alone. `how` says which was used.
PeakFlops cpu_peak_flops(int threads, DType dtype = DType::f32);

/// A run achieved `achieved` ops/s at `dtype`: the peak can be no lower. Returns `peak` unchanged
/// when it is higher; else the achieved rate (recorded as the best for this CPU, thread count and
/// dtype, so later runs start from it) with `how` saying so.
PeakFlops raise_peak_to_achieved(const PeakFlops& peak, double achieved, int threads, DType dtype = DType::f32);

/// achieved / peak, clamped to [0, 1] (0 for an unknown peak): what reports and the GUI show as MFU.
double mfu_fraction(double achieved, double peak);

}  // namespace lathe
