// Tensor construction, views, layout queries and host element access.
#include "engine/core/tensor.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>

namespace lathe {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return s;
}

std::vector<int64_t> channels_last_strides(const Shape& shape) {
  LATHE_CHECK(shape.size() == 4, "channels_last needs a 4-D shape, got ", shape_str(shape));
  const int64_t C = shape[1], H = shape[2], W = shape[3];
  return {H * W * C, 1, W * C, C};
}

Storage::Storage(size_t bytes, Device device) : m_bytes(bytes), m_device(device) {
  m_data = allocator_for(device).allocate(bytes);
}

Storage::Storage(void* data, size_t bytes, std::shared_ptr<void> owner)
    : m_data(data), m_bytes(bytes), m_device(Device::cpu()), m_owner(std::move(owner)) {
  LATHE_CHECK(m_owner != nullptr, "a Storage over outside memory needs its owner");
}

Storage::~Storage() {
  if (!m_owner)
    allocator_for(m_device).deallocate(m_data, m_bytes);
}

Tensor Tensor::over(void* data, const Tensor& like, std::shared_ptr<void> owner) {
  LATHE_CHECK(like.defined() && like.is_dense(), "Tensor::over needs a dense layout, got ", like.describe());
  Tensor t;
  t.m_shape = like.m_shape;
  t.m_strides = like.m_strides;
  t.m_dtype = like.m_dtype;
  t.m_storage = std::make_shared<Storage>(data, std::max<size_t>(like.nbytes(), 1), std::move(owner));
  return t;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, MemoryFormat format) {
  for (int64_t d : shape)
    LATHE_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
  Tensor t;
  t.m_shape = shape;
  t.m_dtype = dtype;
  t.m_strides = format == MemoryFormat::channels_last ? channels_last_strides(shape) : contiguous_strides(shape);
  t.m_storage = std::make_shared<Storage>(std::max<size_t>(t.nbytes(), 1), device);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, MemoryFormat format) {
  Tensor t = empty(shape, dtype, Device::cpu(), format);
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

namespace {
/// Strides agree where it matters: a dimension of size 1 is never stepped along.
bool same_layout(const Shape& shape, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && a[i] != b[i])
      return false;
  return true;
}
}  // namespace

bool Tensor::is_contiguous() const { return same_layout(m_shape, m_strides, contiguous_strides(m_shape)); }

bool Tensor::is_channels_last() const {
  return m_shape.size() == 4 && same_layout(m_shape, m_strides, channels_last_strides(m_shape));
}

bool Tensor::is_dense() const {
  // Dense when sorting dimensions by stride gives a contiguous layout.
  std::vector<size_t> order(m_shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return m_strides[a] < m_strides[b]; });
  int64_t expect = 1;
  for (size_t i : order) {
    if (m_shape[i] == 1)
      continue;
    if (m_strides[i] != expect)
      return false;
    expect *= m_shape[i];
  }
  return true;
}

Tensor Tensor::view(const Shape& shape) const {
  LATHE_CHECK(is_contiguous(), "view() needs a contiguous tensor, got ", describe());
  LATHE_CHECK(shape_numel(shape) == numel(), "view ", shape_str(shape), " does not match ", describe());
  Tensor t = *this;
  t.m_shape = shape;
  t.m_strides = contiguous_strides(shape);
  return t;
}

Tensor Tensor::reinterpret(const Shape& shape) const {
  LATHE_CHECK(is_dense(), "reinterpret() needs a dense tensor, got ", describe());
  LATHE_CHECK(shape_numel(shape) == numel(), "reinterpret ", shape_str(shape), " does not match ", describe());
  Tensor t = *this;
  t.m_shape = shape;
  t.m_strides = contiguous_strides(shape);
  return t;
}

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  LATHE_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= m_shape[0], "slice0(", begin, ", ", end,
              ") out of range for ", describe());
  Tensor t = *this;
  t.m_shape[0] = end - begin;
  t.m_offset += static_cast<size_t>(begin * m_strides[0]) * dtype_size(m_dtype);
  return t;
}

int64_t Tensor::offset_of(const std::vector<int64_t>& index) const {
  LATHE_CHECK(index.size() == m_shape.size(), "index rank ", index.size(), " != tensor rank ", m_shape.size());
  int64_t off = 0;
  for (size_t i = 0; i < index.size(); ++i) {
    LATHE_CHECK(index[i] >= 0 && index[i] < m_shape[i], "index out of range in ", describe());
    off += index[i] * m_strides[i];
  }
  return off;
}

int64_t Tensor::offset_of_flat(int64_t i) const {
  int64_t off = 0;
  for (int d = ndim() - 1; d >= 0; --d) {
    off += (i % m_shape[d]) * m_strides[d];
    i /= m_shape[d];
  }
  return off;
}

namespace {
double load(const void* base, DType dt, int64_t off) {
  switch (dt) {
    case DType::f32:
      return static_cast<const float*>(base)[off];
    case DType::f64:
      return static_cast<const double*>(base)[off];
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[off]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[off]);
    case DType::s8:
      return static_cast<const int8_t*>(base)[off];
    case DType::s32:
      return static_cast<const int32_t*>(base)[off];
    case DType::u8:
      return static_cast<const uint8_t*>(base)[off];
  }
  return 0;
}
void store(void* base, DType dt, int64_t off, double v) {
  switch (dt) {
    case DType::f32:
      static_cast<float*>(base)[off] = static_cast<float>(v);
      break;
    case DType::f64:
      static_cast<double*>(base)[off] = v;
      break;
    case DType::bf16:
      static_cast<uint16_t*>(base)[off] = f32_to_bf16(static_cast<float>(v));
      break;
    case DType::f16:
      static_cast<uint16_t*>(base)[off] = f32_to_f16(static_cast<float>(v));
      break;
    case DType::s8:
      static_cast<int8_t*>(base)[off] = static_cast<int8_t>(v);
      break;
    case DType::s32:
      static_cast<int32_t*>(base)[off] = static_cast<int32_t>(v);
      break;
    case DType::u8:
      static_cast<uint8_t*>(base)[off] = static_cast<uint8_t>(v);
      break;
  }
}
}  // namespace

double Tensor::get(const std::vector<int64_t>& index) const {
  LATHE_CHECK(device().is_cpu(), "get() on a ", device().str(), " tensor");
  return load(raw(), m_dtype, offset_of(index));
}

void Tensor::set(const std::vector<int64_t>& index, double value) {
  LATHE_CHECK(device().is_cpu(), "set() on a ", device().str(), " tensor");
  store(raw(), m_dtype, offset_of(index), value);
}

double Tensor::at_flat(int64_t i) const {
  LATHE_CHECK(device().is_cpu(), "at_flat() on a ", device().str(), " tensor");
  return load(raw(), m_dtype, offset_of_flat(i));
}

void Tensor::set_flat(int64_t i, double value) {
  LATHE_CHECK(device().is_cpu(), "set_flat() on a ", device().str(), " tensor");
  store(raw(), m_dtype, offset_of_flat(i), value);
}

void Tensor::fill(double value) {
  const int64_t n = numel();
  if (m_dtype == DType::f32 && is_dense()) {
    std::fill_n(static_cast<float*>(raw()), n, static_cast<float>(value));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    set_flat(i, value);
}

void Tensor::copy_to(Tensor& dst) const {
  LATHE_CHECK(dst.shape() == m_shape && dst.dtype() == m_dtype, "copy_to: ", describe(), " -> ", dst.describe());
  LATHE_CHECK(device().is_cpu() && dst.device().is_cpu(), "copy_to is host-only; use Backend::copy");
  if (m_strides == dst.m_strides && is_dense()) {
    std::memcpy(dst.raw(), raw(), nbytes());
    return;
  }
  const int64_t n = numel();
  const size_t es = dtype_size(m_dtype);
  const char* s = static_cast<const char*>(raw());
  char* d = static_cast<char*>(dst.raw());
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(d + dst.offset_of_flat(i) * es, s + offset_of_flat(i) * es, es);
}

Tensor Tensor::contiguous_copy() const {
  Tensor out = empty(m_shape, m_dtype);
  copy_to(out);
  return out;
}

std::string Tensor::describe() const {
  std::ostringstream os;
  os << "Tensor(" << shape_str(m_shape) << ", " << dtype_name(m_dtype) << ", " << device().str();
  if (is_channels_last() && !is_contiguous())
    os << ", channels_last";
  os << ")";
  return os.str();
}

}  // namespace lathe
