// Nvml: GPU telemetry (utilisation, memory, name) through NVIDIA's management library, loaded at
// run time with dlopen("libnvidia-ml.so.1") so the engine builds and runs without CUDA or a driver.
// When the library or a device is missing, available() is false, why_unavailable() says why, and
// every query returns nothing: it never throws.
// GPU-Util (nvmlDeviceGetUtilizationRates) is the share of time *any* kernel ran: one kernel on one
// SM reads 100%. GpmMeter reads what the SMs really did from NVML's GPU Performance Monitoring
// (Hopper and newer): SM activity, occupancy, tensor-core activity, DRAM bandwidth, each over the
// window between two samples.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace lathe {

struct GpuSample {
  double util_percent = 0;  ///< percent of the last sample period a kernel was running
  uint64_t mem_used_bytes = 0;
  uint64_t mem_total_bytes = 0;
  double power_w = NAN;       ///< board power draw; NaN where the device does not report it
  double sm_clock_mhz = NAN;  ///< current SM clock; NaN where not reported
};

/// GPM metrics over one window, each a fraction in [0, 1] (NVML reports percent).
struct GpmReading {
  double sm_activity = 0;      ///< NVML_GPM_METRIC_SM_UTIL: share of SMs busy, averaged over time
  double sm_occupancy = 0;     ///< NVML_GPM_METRIC_SM_OCCUPANCY: resident warps / the SMs' maximum
  double tensor_activity = 0;  ///< NVML_GPM_METRIC_ANY_TENSOR_UTIL: share of time tensor cores worked
  double dram_bw_util = 0;     ///< NVML_GPM_METRIC_DRAM_BW_UTIL: DRAM bandwidth / its maximum
};

class Nvml {
 public:
  /// The process-wide instance (the library is initialised once, on first use).
  static Nvml& instance();

  bool available() const { return m_available; }
  std::string why_unavailable() const { return m_why; }
  /// Devices NVML sees (0 when unavailable).
  int device_count() const;
  /// One reading of device `device`; nullopt when unavailable or the query fails.
  std::optional<GpuSample> sample(int device) const;
  /// The device's product name ("" when unavailable).
  std::string device_name(int device) const;

  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  struct Api;  ///< resolved entry points (defined in nvml.cpp)

 private:
  friend class GpmMeter;
  Nvml();
  ~Nvml();

  Api* m_api = nullptr;  // owned; function pointers resolved from the library
  void* m_library = nullptr;
  bool m_available = false;
  std::string m_why;
};

/// GPM readings of one device: each sample() gives the metrics since the previous one. Where GPM is
/// missing (NVML unavailable, an older driver, a GPU before Hopper), supported() is false and
/// why_unsupported() says why. Not thread-safe: one owner (GpuSampler's thread).
class GpmMeter {
 public:
  explicit GpmMeter(int device);
  ~GpmMeter();
  GpmMeter(const GpmMeter&) = delete;
  GpmMeter& operator=(const GpmMeter&) = delete;

  bool supported() const { return m_supported; }
  const std::string& why_unsupported() const { return m_why; }
  /// The metrics since the last call; the first call only opens the window (nullopt), as does a
  /// failed query.
  std::optional<GpmReading> sample();

 private:
  const Nvml::Api* m_api = nullptr;
  void* m_handle = nullptr;
  void* m_samples[2] = {nullptr, nullptr};
  int m_last = -1;  ///< which of m_samples holds the previous sample; -1 = none yet
  bool m_supported = false;
  std::string m_why;
};

}  // namespace lathe
