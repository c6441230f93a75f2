// GpuSampler: reads a GPU's telemetry on a thread of its own, once per interval (compute.telemetry_s,
// 1 s by default), so the training thread never waits on NVML: NVML's GPU-Util, memory, power and SM
// clock, and where the GPU has them the GPM metrics of the last interval (nvml.h). The training loop
// takes the latest reading at each logging point.
// util_divergence() is the live view's warning: GPU-Util counts time with any kernel running, so a
// run of small kernels that keep a few SMs busy reads near 100% while most of the GPU idles.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/run/metrics_sink.h"
#include "engine/run/nvml.h"

namespace lathe {

struct GpuReading {
  GpuSample nvml;
  std::optional<GpmReading> gpm;  ///< none where GPM is missing or its first window is still open
};

class GpuSampler {
 public:
  /// Starts sampling `device` every `interval_s` seconds (> 0).
  GpuSampler(int device, double interval_s);
  ~GpuSampler();  ///< stops and joins the thread (at most one NVML query late)
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  /// The newest reading; nullopt before the first one or where NVML is unavailable.
  std::optional<GpuReading> latest() const;
  /// "" where GPM metrics are read; otherwise why not (for the run's events).
  std::string gpm_unavailable_reason() const;

 private:
  void loop(int device, double interval_s);

  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_quit = false;
  std::optional<GpuReading> m_latest;
  std::string m_gpm_why;
  std::thread m_thread;
};

/// The warning when GPU-Util and SM activity (both in [0, 1]) tell different stories: GPU-Util at
/// least 50% while SM activity is under half of it. nullopt when they agree.
std::optional<std::string> util_divergence(double gpu_util, double sm_activity);

/// Logs a reading at `step`: device/util (GPU-Util), device/power_w, device/sm_clock_mhz and, with
/// GPM, device/sm_activity, device/sm_occupancy, device/tensor_activity, device/dram_bw_util (all
/// fractions in [0, 1] but power and clock). The first time util_divergence() warns, a
/// "device/warning" event (step, wall_ms, text, gpu_util, sm_activity) that the live view marks;
/// `warned` remembers it.
void log_gpu_reading(MetricsSink& sink, int64_t step, double wall_ms, const GpuReading& reading, bool& warned);

}  // namespace lathe
