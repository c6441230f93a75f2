// The host allocator and the registry that maps devices to allocators.
#include "engine/core/device.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "engine/core/error.h"

namespace lathe {

std::string Device::str() const {
  return kind == DeviceKind::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

void Allocator::note_alloc(size_t bytes) {
  const size_t now = m_live.fetch_add(bytes) + bytes;
  size_t peak = m_peak.load();
  while (now > peak && !m_peak.compare_exchange_weak(peak, now)) {
  }
}

namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p)
      throw std::bad_alloc();
    note_alloc(bytes);
    return p;
  }
  void deallocate(void* ptr, size_t bytes) noexcept override {
    std::free(ptr);
    note_free(bytes);
  }
  Device device() const override { return Device::cpu(); }
};

struct Registry {
  std::mutex mutex;
  std::vector<Allocator*> cuda;  // by device index
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

void register_allocator(Device device, Allocator* allocator) {
  LATHE_CHECK(device.kind == DeviceKind::cuda, "only CUDA allocators are registered");
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.cuda.size() <= static_cast<size_t>(device.index))
    r.cuda.resize(device.index + 1, nullptr);
  r.cuda[device.index] = allocator;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu())
    return cpu_allocator();
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  LATHE_CHECK(static_cast<size_t>(device.index) < r.cuda.size() && r.cuda[device.index], "no allocator for ",
              device.str(), ": this build or machine has no CUDA backend for it");
  return *r.cuda[device.index];
}

}  // namespace lathe
