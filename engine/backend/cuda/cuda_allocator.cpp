// The caching device allocator (see cuda_allocator.h): cudaMalloc/cudaFree around a StreamBlockPool,
// whose guard events are pooled CUDA events.
#include "engine/backend/cuda/cuda_allocator.h"

#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_scope.h"

namespace lathe::cuda {

namespace {

constexpr size_t kSmallGranule = 512;
constexpr size_t kLargeGranule = size_t{2} << 20;
constexpr size_t kLargeThreshold = size_t{1} << 20;

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

struct ThreadStream {
  int device = -1;
  StreamId stream = kNoStream;
};
thread_local ThreadStream t_scope;

}  // namespace

// ------------------------------------------------------------------ StreamScope
StreamScope::StreamScope(int device, cudaStream_t stream)
    : m_prev_device(t_scope.device), m_prev_stream(t_scope.stream) {
  t_scope = {device, reinterpret_cast<StreamId>(stream)};
}

StreamScope::~StreamScope() { t_scope = {m_prev_device, m_prev_stream}; }

StreamId StreamScope::current(int device) { return t_scope.device == device ? t_scope.stream : kNoStream; }

// ------------------------------------------------------------------ events
/// CUDA events for the pool's guards, recycled (creating one costs about as much as recording it).
/// Called with the allocator's mutex held and its device current.
class CudaAllocator::EventClock final : public StreamClock {
 public:
  ~EventClock() override {
    for (cudaEvent_t e : m_spare)
      (void)cudaEventDestroy(e);
  }

  EventId record(StreamId stream) noexcept override {
    cudaEvent_t e = nullptr;
    if (!m_spare.empty()) {
      e = m_spare.back();
      m_spare.pop_back();
    } else if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
      e = nullptr;
    }
    if (e && cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)) == cudaSuccess)
      return reinterpret_cast<EventId>(e);
    // No event: wait for the stream instead, so that the guard is complete when it is returned.
    (void)cudaGetLastError();
    if (e)
      m_spare.push_back(e);
    (void)cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream));
    (void)cudaGetLastError();
    return 0;
  }

  bool done(EventId event) noexcept override {
    if (event == 0)
      return true;
    const cudaError_t err = cudaEventQuery(reinterpret_cast<cudaEvent_t>(event));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    if (err != cudaSuccess) {  // a broken context: waiting would never end
      (void)cudaGetLastError();
    }
    return true;
  }

  void release(EventId event) noexcept override {
    if (event != 0)
      m_spare.push_back(reinterpret_cast<cudaEvent_t>(event));
  }

 private:
  std::vector<cudaEvent_t> m_spare;
};

// ------------------------------------------------------------------ allocator
CudaAllocator::CudaAllocator(int device_index)
    : m_device(device_index),
      m_clock(std::make_unique<EventClock>()),
      m_pool(std::make_unique<StreamBlockPool>(*m_clock)) {}

CudaAllocator::~CudaAllocator() {
  empty_cache();
  DeviceScope scope(m_device);
  m_pool.reset();
  m_clock.reset();
}

CudaAllocator* CudaAllocator::for_device(int device) noexcept {
  try {
    return dynamic_cast<CudaAllocator*>(&allocator_for(Device::cuda(device)));
  } catch (...) {
    return nullptr;
  }
}

size_t CudaAllocator::round_size(size_t bytes) {
  if (bytes == 0)
    bytes = 1;
  const size_t g = bytes > kLargeThreshold ? kLargeGranule : kSmallGranule;
  return (bytes + g - 1) / g * g;
}

void CudaAllocator::add_stream(cudaStream_t stream) {
  std::lock_guard lock(m_mutex);
  m_pool->add_stream(reinterpret_cast<StreamId>(stream));
}

void CudaAllocator::remove_stream(cudaStream_t stream) {
  std::lock_guard lock(m_mutex);
  m_pool->remove_stream(reinterpret_cast<StreamId>(stream));
}

void* CudaAllocator::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  std::lock_guard lock(m_mutex);
  DeviceScope scope(m_device);
  if (auto block = m_pool->take(size, m_pool->resolve(StreamScope::current(m_device)))) {
    m_in_use.emplace(block->ptr, block->size);
    note_alloc(bytes);
    return block->ptr;
  }
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
  DeviceScope scope(m_device);
  m_pool->put({ptr, it->second});
  m_in_use.erase(it);
  note_free(bytes);
}

size_t CudaAllocator::reserved_bytes() const {
  std::lock_guard lock(m_mutex);
  return m_reserved;
}

size_t CudaAllocator::cached_bytes() const {
  std::lock_guard lock(m_mutex);
  return m_pool->cached_bytes();
}

void CudaAllocator::empty_cache() noexcept {
  std::lock_guard lock(m_mutex);
  release_cached_locked();
}

void CudaAllocator::release_cached_locked() noexcept {
  if (m_pool->cached_blocks() == 0)
    return;
  DeviceScope scope(m_device);
  // Cached blocks may still be read by pending work of any stream: let the device finish first.
  (void)cudaDeviceSynchronize();
  m_pool->drain([&](void* p, size_t size) {
    (void)cudaFree(p);
    m_reserved -= size;
  });
  (void)cudaGetLastError();
}

}  // namespace lathe::cuda
