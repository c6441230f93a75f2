// CudaAllocator: the device-memory Allocator for one CUDA device. A simple caching allocator:
// freed blocks are kept in size-sorted free lists and handed out again, because cudaMalloc and
// cudaFree synchronise the device and cost tens of microseconds each. Live and peak bytes count
// what tensors asked for (the `mem/peak_bytes` metric); reserved_bytes() adds what the cache holds.
//
// Reuse is safe because all work of one device runs on one stream in issue order (the backend's):
// a block freed after launching work on it and reallocated later is only touched by later work on
// that stream. Work on other streams must synchronise before freeing.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include "engine/core/device.h"

namespace lathe::cuda {

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

  /// Bytes held from the driver: blocks in use plus cached free blocks.
  size_t reserved_bytes() const;
  size_t cached_bytes() const;
  /// Returns every cached free block to the driver (synchronises the device).
  void empty_cache() noexcept;

  /// Block size an allocation of `bytes` is rounded to (512-byte granules; 2 MiB above 1 MiB).
  static size_t round_size(size_t bytes);

 private:
  void release_cached_locked() noexcept;

  int m_device;
  mutable std::mutex m_mutex;
  std::multimap<size_t, void*> m_free;         // block size -> block
  std::unordered_map<void*, size_t> m_in_use;  // block -> block size
  size_t m_reserved = 0;
  size_t m_cached = 0;
};

}  // namespace lathe::cuda
