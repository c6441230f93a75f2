// The caching device allocator (see cuda_allocator.h).
#include "engine/backend/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include <string>

#include "engine/backend/cuda/cuda_check.h"

namespace lathe::cuda {

namespace {

constexpr size_t kSmallGranule = 512;
constexpr size_t kLargeGranule = size_t{2} << 20;
constexpr size_t kLargeThreshold = size_t{1} << 20;

/// Makes `device` current for a scope and restores the previous device (errors ignored: callers
/// check the calls that matter).
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

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

CudaAllocator::CudaAllocator(int device_index) : m_device(device_index) {}

CudaAllocator::~CudaAllocator() { empty_cache(); }

size_t CudaAllocator::round_size(size_t bytes) {
  if (bytes == 0)
    bytes = 1;
  const size_t g = bytes > kLargeThreshold ? kLargeGranule : kSmallGranule;
  return (bytes + g - 1) / g * g;
}

void* CudaAllocator::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  std::lock_guard lock(m_mutex);
  // Reuse a cached block of at least `size` but not more than twice it, so small tensors do not
  // pin large blocks.
  if (auto it = m_free.lower_bound(size); it != m_free.end() && it->first <= 2 * size) {
    void* p = it->second;
    m_in_use.emplace(p, it->first);
    m_cached -= it->first;
    m_free.erase(it);
    note_alloc(bytes);
    return p;
  }
  DeviceScope scope(m_device);
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    release_cached_locked();
    err = cudaMalloc(&p, size);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    if (err == cudaErrorMemoryAllocation)
      throw Error("CUDA out of memory on cuda:" + std::to_string(m_device) + ": asked for " + mib(size) + " with " +
                  mib(live_bytes()) + " in live tensors and " + mib(m_reserved) + " reserved");
    LATHE_CUDA_CHECK(err);
  }
  m_in_use.emplace(p, size);
  m_reserved += size;
  note_alloc(bytes);
  return p;
}

void CudaAllocator::deallocate(void* ptr, size_t bytes) noexcept {
  if (!ptr)
    return;
  std::lock_guard lock(m_mutex);
  auto it = m_in_use.find(ptr);
  if (it == m_in_use.end())
    return;  // not ours: ignore rather than corrupt the cache
  m_free.emplace(it->second, ptr);
  m_cached += it->second;
  m_in_use.erase(it);
  note_free(bytes);
}

size_t CudaAllocator::reserved_bytes() const {
  std::lock_guard lock(m_mutex);
  return m_reserved;
}

size_t CudaAllocator::cached_bytes() const {
  std::lock_guard lock(m_mutex);
  return m_cached;
}

void CudaAllocator::empty_cache() noexcept {
  std::lock_guard lock(m_mutex);
  release_cached_locked();
}

void CudaAllocator::release_cached_locked() noexcept {
  if (m_free.empty())
    return;
  DeviceScope scope(m_device);
  for (auto& [size, p] : m_free) {
    (void)cudaFree(p);
    m_reserved -= size;
  }
  (void)cudaGetLastError();
  m_free.clear();
  m_cached = 0;
}

}  // namespace lathe::cuda
