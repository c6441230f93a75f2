// CudaAllocator: the device-memory Allocator for one CUDA device, shared by every backend on it. A
// caching allocator: freed blocks are kept in a size-sorted cache and handed out again, because
// cudaMalloc and cudaFree synchronise the device and cost tens of microseconds each. Live and peak
// bytes count what tensors asked for (the `mem/peak_bytes` metric); reserved_bytes() adds the cache.
//
// Reuse across streams: each backend (CudaContext) registers its stream here. A freed block is
// guarded by an event recorded at free time on every registered stream, and handed to a stream only
// once the guards of the other streams have completed (stream_block_pool.h: the bookkeeping, unit-
// tested on the CPU). The stream an allocation is for is the one whose op runs on the calling thread
// (a StreamScope, from CudaContext::activate()), else the device's only registered stream; with
// several backends and no scope, every guard must have completed. Work on streams not registered
// here (e.g. a library's own) must be synchronised before its memory is freed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "engine/backend/cuda/stream_block_pool.h"
#include "engine/core/device.h"

namespace lathe::cuda {

/// For its lifetime, allocations of `device` on this thread are for `stream` (its op is running).
/// Nests: the previous scope is restored at the end.
class StreamScope {
 public:
  StreamScope(int device, cudaStream_t stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

  /// The calling thread's scoped stream for `device`, or kNoStream.
  static StreamId current(int device);

 private:
  int m_prev_device;
  StreamId m_prev_stream;
};

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device_index);
  ~CudaAllocator() override;  // returns cached blocks to the driver (errors ignored)
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  /// Throws lathe::Error naming the sizes when the device is out of memory even after emptying the cache.
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) noexcept override;
  Device device() const override { return Device::cuda(m_device); }

  /// A stream whose work may touch this device's memory (each CudaContext's, from creation until it
  /// has synchronised at destruction).
  void add_stream(cudaStream_t stream);
  void remove_stream(cudaStream_t stream);

  /// Bytes held from the driver: blocks in use plus cached free blocks.
  size_t reserved_bytes() const;
  size_t cached_bytes() const;
  /// Returns every cached free block to the driver (synchronises the device).
  void empty_cache() noexcept;

  /// Block size an allocation of `bytes` is rounded to (512-byte granules; 2 MiB above 1 MiB).
  static size_t round_size(size_t bytes);

  /// The allocator registered for a CUDA device, or nullptr (none registered, or not a CudaAllocator).
  static CudaAllocator* for_device(int device) noexcept;

 private:
  class EventClock;
  void release_cached_locked() noexcept;

  int m_device;
  mutable std::mutex m_mutex;
  std::unique_ptr<EventClock> m_clock;
  std::unique_ptr<StreamBlockPool> m_pool;
  std::unordered_map<void*, size_t> m_in_use;  // block -> block size
  size_t m_reserved = 0;
};

}  // namespace lathe::cuda
