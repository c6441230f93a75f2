// Tensor: a typed, strided view of reference-counted device memory.
// Shapes are logical (N, C, H, W for images, as in PyTorch); strides say how they lie in memory,
// so one tensor type carries both NCHW and channels-last (NHWC) activations.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/core/error.h"

namespace lathe {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

enum class MemoryFormat : uint8_t { contiguous, channels_last };

/// Owns one allocation; freed when the last tensor viewing it goes away. Or, host memory someone
/// else provides (a shared-memory segment): `owner` is held until the last tensor viewing it goes.
class Storage {
 public:
  Storage(size_t bytes, Device device);
  Storage(void* data, size_t bytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return m_data; }
  size_t bytes() const { return m_bytes; }
  Device device() const { return m_device; }

 private:
  void* m_data = nullptr;
  size_t m_bytes = 0;
  Device m_device;
  std::shared_ptr<void> m_owner;  ///< set: the memory is not the allocator's
};

class Tensor {
 public:
  Tensor() = default;

  /// Uninitialised memory. `channels_last` applies to 4-D shapes only.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu(),
                      MemoryFormat format = MemoryFormat::contiguous);
  /// A host tensor over `data`, laid out as `like` (shape, strides, dtype; dense), which `owner`
  /// keeps valid while any tensor views it. `data` holds like.nbytes() bytes.
  static Tensor over(void* data, const Tensor& like, std::shared_ptr<void> owner);
  /// Zero-filled host tensor (device tensors are zeroed by their backend).
  static Tensor zeros(const Shape& shape, DType dtype, MemoryFormat format = MemoryFormat::contiguous);

  bool defined() const { return m_storage != nullptr; }
  const Shape& shape() const { return m_shape; }
  int64_t dim(int i) const { return m_shape.at(i < 0 ? m_shape.size() + i : i); }
  int ndim() const { return static_cast<int>(m_shape.size()); }
  const std::vector<int64_t>& strides() const { return m_strides; }
  int64_t stride(int i) const { return m_strides.at(i < 0 ? m_strides.size() + i : i); }
  DType dtype() const { return m_dtype; }
  Device device() const { return m_storage ? m_storage->device() : Device::cpu(); }
  int64_t numel() const { return shape_numel(m_shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(m_dtype); }

  /// True when the elements are dense in memory (in any dimension order).
  bool is_dense() const;
  /// Row-major contiguous.
  bool is_contiguous() const;
  /// 4-D and laid out N, H, W, C in memory.
  bool is_channels_last() const;
  MemoryFormat format() const {
    return is_channels_last() && !is_contiguous() ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  }

  void* raw() const { return static_cast<char*>(m_storage->data()) + m_offset; }
  template <class T>
  T* data() const {
    LATHE_CHECK(m_dtype == dtype_of<T>(), "tensor holds ", dtype_name(m_dtype), ", accessed as ",
                dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw());
  }

  /// A view with another shape over the same (contiguous) memory.
  Tensor view(const Shape& shape) const;
  /// The same dense memory read in memory order as a contiguous `shape` (e.g. a channels-last
  /// [N, C, H, W] as N rows of H*W*C), sharing it; numel must match.
  Tensor reinterpret(const Shape& shape) const;
  /// Rows [begin, end) of the first dimension, sharing memory.
  Tensor slice0(int64_t begin, int64_t end) const;
  /// A host copy laid out row-major contiguous (any layout, host tensors only).
  Tensor contiguous_copy() const;
  /// Element-by-element copy into `dst` of the same shape and dtype, any layouts (host only).
  void copy_to(Tensor& dst) const;

  /// Host-only element access by logical index, in double (for tests and references).
  double get(const std::vector<int64_t>& index) const;
  void set(const std::vector<int64_t>& index, double value);
  /// Value of the i-th element in logical row-major order (host only).
  double at_flat(int64_t i) const;
  void set_flat(int64_t i, double value);

  void fill(double value);  // host only
  std::string describe() const;

  bool same_memory(const Tensor& other) const { return m_storage == other.m_storage && m_offset == other.m_offset; }

 private:
  std::shared_ptr<Storage> m_storage;
  size_t m_offset = 0;  // bytes
  Shape m_shape;
  std::vector<int64_t> m_strides;  // elements
  DType m_dtype = DType::f32;

  int64_t offset_of(const std::vector<int64_t>& index) const;
  int64_t offset_of_flat(int64_t i) const;
};

std::vector<int64_t> contiguous_strides(const Shape& shape);
std::vector<int64_t> channels_last_strides(const Shape& shape);

}  // namespace lathe
