// GpuSampler (see gpu_sampler.h).
#include "engine/run/gpu_sampler.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "engine/core/error.h"

namespace lathe {

GpuSampler::GpuSampler(int device, double interval_s) {
  LATHE_CHECK(interval_s > 0, "GpuSampler: the interval must be > 0 s, got ", interval_s);
  m_thread = std::thread([this, device, interval_s] { loop(device, interval_s); });
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard lock(m_mutex);
    m_quit = true;
  }
  m_wake.notify_all();
  m_thread.join();
}

std::optional<GpuReading> GpuSampler::latest() const {
  std::lock_guard lock(m_mutex);
  return m_latest;
}

std::string GpuSampler::gpm_unavailable_reason() const {
  std::lock_guard lock(m_mutex);
  return m_gpm_why;
}

void GpuSampler::loop(int device, double interval_s) {
  GpmMeter gpm(device);  // opens its first window now
  {
    std::lock_guard lock(m_mutex);
    m_gpm_why = gpm.supported() ? "" : gpm.why_unsupported();
  }
  gpm.sample();
  const auto interval = std::chrono::duration<double>(interval_s);
  std::unique_lock lock(m_mutex);
  while (!m_wake.wait_for(lock, interval, [this] { return m_quit; })) {
    lock.unlock();
    std::optional<GpuReading> r;
    if (const std::optional<GpuSample> s = Nvml::instance().sample(device))
      r = GpuReading{*s, gpm.sample()};
    lock.lock();
    if (r)
      m_latest = r;
  }
}

std::optional<std::string> util_divergence(double gpu_util, double sm_activity) {
  if (!(gpu_util >= 0.5) || !(sm_activity >= 0) || sm_activity >= gpu_util / 2)
    return std::nullopt;
  char text[320];
  std::snprintf(text, sizeof(text),
                "GPU-Util reads %.0f%% but SM activity is %.0f%%: kernels run all the time on few of the SMs "
                "(small kernels or batches, launch-bound work), so GPU-Util overstates how busy the GPU is",
                100 * gpu_util, 100 * sm_activity);
  return std::string(text);
}

void log_gpu_reading(MetricsSink& sink, int64_t step, double wall_ms, const GpuReading& reading, bool& warned) {
  const double util = reading.nvml.util_percent / 100.0;
  sink.sample("device/util", step, wall_ms, util);
  if (std::isfinite(reading.nvml.power_w))
    sink.sample("device/power_w", step, wall_ms, reading.nvml.power_w);
  if (std::isfinite(reading.nvml.sm_clock_mhz))
    sink.sample("device/sm_clock_mhz", step, wall_ms, reading.nvml.sm_clock_mhz);
  if (!reading.gpm)
    return;
  const GpmReading& g = *reading.gpm;
  sink.sample("device/sm_activity", step, wall_ms, g.sm_activity);
  sink.sample("device/sm_occupancy", step, wall_ms, g.sm_occupancy);
  sink.sample("device/tensor_activity", step, wall_ms, g.tensor_activity);
  sink.sample("device/dram_bw_util", step, wall_ms, g.dram_bw_util);
  if (warned)
    return;
  if (const std::optional<std::string> text = util_divergence(util, g.sm_activity)) {
    warned = true;
    sink.event(
        "device/warning",
        {{"step", step}, {"wall_ms", wall_ms}, {"text", *text}, {"gpu_util", util}, {"sm_activity", g.sm_activity}});
  }
}

}  // namespace lathe
