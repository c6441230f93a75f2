// DeviceScope: makes a CUDA device current for a scope and restores the previous one, for code
// that may run on a thread whose current device is another (the caching allocator, the NCCL
// communicator's streams and events). Errors are ignored: callers check the calls that matter.
#pragma once

#include <cuda_runtime_api.h>

namespace lathe::cuda {

class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&m_previous) != cudaSuccess)
      m_previous = -1;
    if (m_previous != device)
      (void)cudaSetDevice(device);
  }
  ~DeviceScope() {
    int now = -1;
    if (m_previous >= 0 && cudaGetDevice(&now) == cudaSuccess && now != m_previous)
      (void)cudaSetDevice(m_previous);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int m_previous = -1;
};

}  // namespace lathe::cuda
