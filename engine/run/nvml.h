// Nvml: GPU telemetry (utilisation, memory, name) through NVIDIA's management library, loaded at
// run time with dlopen("libnvidia-ml.so.1") so the engine builds and runs without CUDA or a driver.
// When the library or a device is missing, available() is false, why_unavailable() says why, and
// every query returns nothing: it never throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace lathe {

struct GpuSample {
  double util_percent = 0;  ///< percent of the last sample period a kernel was running
  uint64_t mem_used_bytes = 0;
  uint64_t mem_total_bytes = 0;
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
  Nvml();
  ~Nvml();

  Api* m_api = nullptr;  // owned; function pointers resolved from the library
  void* m_library = nullptr;
  bool m_available = false;
  std::string m_why;
};

}  // namespace lathe
