// Run-time binding of the few NVML entry points telemetry needs (see nvml.h). The structs and
// signatures below are NVML's C ABI (nvml.h from the CUDA toolkit), declared here so this file needs
// no CUDA headers.
#include "engine/run/nvml.h"

#include <dlfcn.h>

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
  return GpuSample{static_cast<double>(util.gpu), mem.used, mem.total};
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

}  // namespace lathe
