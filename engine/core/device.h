// Where a tensor's memory lives, and the allocators that provide it (with peak-byte accounting).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace lathe {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static Device cpu() { return {DeviceKind::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceKind::cuda, i}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

/// Hands out device memory. Implementations count live and peak bytes for the `mem/peak_bytes` metric.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) noexcept = 0;
  virtual Device device() const = 0;

  size_t live_bytes() const { return m_live.load(); }
  size_t peak_bytes() const { return m_peak.load(); }
  void reset_peak() { m_peak.store(m_live.load()); }

 protected:
  void note_alloc(size_t bytes);
  void note_free(size_t bytes) noexcept { m_live.fetch_sub(bytes); }

 private:
  std::atomic<size_t> m_live{0};
  std::atomic<size_t> m_peak{0};
};

/// 64-byte aligned host memory (what oneDNN and AVX-512 want).
Allocator& cpu_allocator();

/// The allocator for a device; CUDA allocators are registered by the CUDA backend when it is linked.
Allocator& allocator_for(Device device);
void register_allocator(Device device, Allocator* allocator);

}  // namespace lathe
