// Run-time binding of the few NVML entry points telemetry needs (see nvml.h). The structs and
// signatures below are NVML's C ABI (nvml.h from the CUDA toolkit), declared here so this file needs
// no CUDA headers.
#include "engine/run/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <memory>

namespace lathe {

namespace {

using NvmlReturn = int;  // nvmlReturn_t: 0 = NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;

struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {  // nvmlMemory_t (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

// GPM (nvml.h, "GPM Structs"): a sample buffer is opaque; a metrics request names two samples and
// the metric ids, and NVML fills each metric's status and value (percent for the ones used here).
using NvmlGpmSample = struct NvmlGpmSampleOpaque*;
constexpr unsigned int kGpmMetricsGetVersion = 1;  // NVML_GPM_METRICS_GET_VERSION
constexpr unsigned int kGpmSupportVersion = 1;     // NVML_GPM_SUPPORT_VERSION
constexpr int kGpmMetricMax = 333;                 // NVML_GPM_METRIC_MAX of the newest header (older: 210)
struct NvmlGpmMetric {                             // nvmlGpmMetric_t
  unsigned int metric_id;
  NvmlReturn nvml_return;
  double value;
  struct {
    char* short_name;
    char* long_name;
    char* unit;
  } info;
};
struct NvmlGpmMetricsGet {  // nvmlGpmMetricsGet_t
  unsigned int version;
  unsigned int num_metrics;
  NvmlGpmSample sample1;
  NvmlGpmSample sample2;
  NvmlGpmMetric metrics[kGpmMetricMax];
};
struct NvmlGpmSupport {  // nvmlGpmSupport_t
  unsigned int version;
  unsigned int is_supported_device;
};
// nvmlGpmMetricId_t values.
constexpr unsigned int kGpmSmUtil = 2, kGpmSmOccupancy = 3, kGpmAnyTensorUtil = 5, kGpmDramBwUtil = 10;

}  // namespace

struct Nvml::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*get_count)(unsigned int*) = nullptr;
  NvmlReturn (*get_handle)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*get_utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*get_memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*get_name)(NvmlDevice, char*, unsigned int) = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  // Optional: power and clock (every current driver), GPM (R520+ drivers, Hopper and newer GPUs).
  NvmlReturn (*get_power)(NvmlDevice, unsigned int*) = nullptr;       // milliwatts
  NvmlReturn (*get_clock)(NvmlDevice, int, unsigned int*) = nullptr;  // MHz
  NvmlReturn (*gpm_query_support)(NvmlDevice, NvmlGpmSupport*) = nullptr;
  NvmlReturn (*gpm_sample_alloc)(NvmlGpmSample*) = nullptr;
  NvmlReturn (*gpm_sample_free)(NvmlGpmSample) = nullptr;
  NvmlReturn (*gpm_sample_get)(NvmlDevice, NvmlGpmSample) = nullptr;
  NvmlReturn (*gpm_metrics_get)(NvmlGpmMetricsGet*) = nullptr;
};

namespace {

template <class F>
bool resolve(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}

std::string describe(const Nvml::Api* api, NvmlReturn r);

}  // namespace

Nvml& Nvml::instance() {
  static Nvml nvml;
  return nvml;
}

Nvml::Nvml() {
  m_library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!m_library) {
    const char* err = dlerror();
    m_why = std::string("libnvidia-ml.so.1 could not be loaded (no NVIDIA driver?): ") + (err ? err : "unknown error");
    return;
  }
  auto api = new Api;
  const bool ok = resolve(m_library, "nvmlInit_v2", api->init) && resolve(m_library, "nvmlShutdown", api->shutdown) &&
                  resolve(m_library, "nvmlDeviceGetHandleByIndex_v2", api->get_handle) &&
                  resolve(m_library, "nvmlDeviceGetUtilizationRates", api->get_utilization) &&
                  resolve(m_library, "nvmlDeviceGetMemoryInfo", api->get_memory) &&
                  resolve(m_library, "nvmlDeviceGetName", api->get_name);
  resolve(m_library, "nvmlDeviceGetCount_v2", api->get_count);  // optional
  resolve(m_library, "nvmlErrorString", api->error_string);     // optional
  resolve(m_library, "nvmlDeviceGetPowerUsage", api->get_power);
  resolve(m_library, "nvmlDeviceGetClockInfo", api->get_clock);
  resolve(m_library, "nvmlGpmQueryDeviceSupport", api->gpm_query_support);
  resolve(m_library, "nvmlGpmSampleAlloc", api->gpm_sample_alloc);
  resolve(m_library, "nvmlGpmSampleFree", api->gpm_sample_free);
  resolve(m_library, "nvmlGpmSampleGet", api->gpm_sample_get);
  resolve(m_library, "nvmlGpmMetricsGet", api->gpm_metrics_get);
  if (!ok) {
    m_why = "libnvidia-ml.so.1 lacks a required entry point (driver too old?)";
    delete api;
    return;
  }
  const NvmlReturn r = api->init();
  if (r != kNvmlSuccess) {
    m_why = "nvmlInit failed: " + describe(api, r);
    delete api;
    return;
  }
  m_api = api;
  m_available = true;
}

Nvml::~Nvml() {
  if (m_api) {
    (void)m_api->shutdown();
    delete m_api;
  }
  // The library stays loaded: unloading at exit gains nothing and can race other static teardown.
}

int Nvml::device_count() const {
  if (!m_available || !m_api->get_count)
    return 0;
  unsigned int n = 0;
  return m_api->get_count(&n) == kNvmlSuccess ? static_cast<int>(n) : 0;
}

std::optional<GpuSample> Nvml::sample(int device) const {
  if (!m_available || device < 0)
    return std::nullopt;
  NvmlDevice handle = nullptr;
  if (m_api->get_handle(static_cast<unsigned int>(device), &handle) != kNvmlSuccess)
    return std::nullopt;
  NvmlUtilization util{};
  NvmlMemory mem{};
  if (m_api->get_utilization(handle, &util) != kNvmlSuccess)
    return std::nullopt;
  if (m_api->get_memory(handle, &mem) != kNvmlSuccess)
    return std::nullopt;
  GpuSample out{static_cast<double>(util.gpu), mem.used, mem.total};
  unsigned int v = 0;
  if (m_api->get_power && m_api->get_power(handle, &v) == kNvmlSuccess)
    out.power_w = v / 1000.0;
  if (m_api->get_clock && m_api->get_clock(handle, kNvmlClockSm, &v) == kNvmlSuccess)
    out.sm_clock_mhz = v;
  return out;
}

std::string Nvml::device_name(int device) const {
  if (!m_available || device < 0)
    return "";
  NvmlDevice handle = nullptr;
  if (m_api->get_handle(static_cast<unsigned int>(device), &handle) != kNvmlSuccess)
    return "";
  char name[96] = {};  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
  if (m_api->get_name(handle, name, sizeof(name)) != kNvmlSuccess)
    return "";
  return name;
}

namespace {

std::string describe(const Nvml::Api* api, NvmlReturn r) {
  const char* s = api && api->error_string ? api->error_string(r) : nullptr;
  return s ? std::string(s) + " (" + std::to_string(r) + ")" : "error " + std::to_string(r);
}

}  // namespace

GpmMeter::GpmMeter(int device) {
  const Nvml& nvml = Nvml::instance();
  if (!nvml.available()) {
    m_why = nvml.why_unavailable();
    return;
  }
  const Nvml::Api* api = nvml.m_api;
  if (!api->gpm_query_support || !api->gpm_sample_alloc || !api->gpm_sample_free || !api->gpm_sample_get ||
      !api->gpm_metrics_get) {
    m_why = "this NVML has no GPM entry points (driver older than R520)";
    return;
  }
  NvmlDevice handle = nullptr;
  if (NvmlReturn r = api->get_handle(static_cast<unsigned int>(device), &handle); r != kNvmlSuccess) {
    m_why = "GPU " + std::to_string(device) + ": " + describe(api, r);
    return;
  }
  NvmlGpmSupport support{kGpmSupportVersion, 0};
  if (NvmlReturn r = api->gpm_query_support(handle, &support); r != kNvmlSuccess || !support.is_supported_device) {
    m_why = "GPU " + std::to_string(device) + " has no GPM metrics (Hopper and newer have them)" +
            (r != kNvmlSuccess ? ": " + describe(api, r) : "");
    return;
  }
  for (void*& s : m_samples) {
    NvmlGpmSample sample = nullptr;
    if (NvmlReturn r = api->gpm_sample_alloc(&sample); r != kNvmlSuccess) {
      m_why = "nvmlGpmSampleAlloc: " + describe(api, r);
      return;  // the destructor frees what was allocated
    }
    s = sample;
  }
  m_api = api;
  m_handle = handle;
  m_supported = true;
}

GpmMeter::~GpmMeter() {
  const Nvml::Api* api = m_api ? m_api : Nvml::instance().m_api;
  for (void* s : m_samples)
    if (s && api)
      (void)api->gpm_sample_free(static_cast<NvmlGpmSample>(s));
}

std::optional<GpmReading> GpmMeter::sample() {
  if (!m_supported)
    return std::nullopt;
  const int now = m_last == 0 ? 1 : 0;
  if (m_api->gpm_sample_get(static_cast<NvmlDevice>(m_handle), static_cast<NvmlGpmSample>(m_samples[now])) !=
      kNvmlSuccess) {
    m_last = -1;  // the window starts again at the next sample
    return std::nullopt;
  }
  const int before = m_last;
  m_last = now;
  if (before < 0)
    return std::nullopt;
  auto get = std::make_unique<NvmlGpmMetricsGet>();  // ~13 KB: not on the sampler thread's stack
  get->version = kGpmMetricsGetVersion;
  get->sample1 = static_cast<NvmlGpmSample>(m_samples[before]);
  get->sample2 = static_cast<NvmlGpmSample>(m_samples[now]);
  const unsigned int ids[] = {kGpmSmUtil, kGpmSmOccupancy, kGpmAnyTensorUtil, kGpmDramBwUtil};
  get->num_metrics = 4;
  for (unsigned int i = 0; i < get->num_metrics; ++i)
    get->metrics[i].metric_id = ids[i];
  if (m_api->gpm_metrics_get(get.get()) != kNvmlSuccess)
    return std::nullopt;
  double v[4];
  for (int i = 0; i < 4; ++i) {
    if (get->metrics[i].nvml_return != kNvmlSuccess || !std::isfinite(get->metrics[i].value))
      return std::nullopt;
    v[i] = std::clamp(get->metrics[i].value / 100.0, 0.0, 1.0);
  }
  return GpmReading{v[0], v[1], v[2], v[3]};
}

}  // namespace lathe
