// Launchers for layout and dtype conversion: strided copies between any two layouts of one shape,
// f32 <-> bf16 / f16 conversion (bit-exact with engine/core/dtype.h), and zero-fill of strided memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lathe::kernels {

constexpr int kMaxDims = 6;

/// Logical sizes and element strides of a tensor, right-aligned in kMaxDims slots (leading slots
/// have size 1). `contiguous` means the element offset equals the logical row-major index.
struct TensorLayout {
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
  bool contiguous;
};

enum class ElemType : int32_t { f32, bf16, f16 };

/// dst[layout_d(i)] = src[layout_s(i)] for the n logical elements; elem_bytes is 1, 2, 4 or 8.
[[nodiscard]] cudaError_t strided_copy(cudaStream_t stream, const void* src, const TensorLayout& src_layout, void* dst,
                                       const TensorLayout& dst_layout, int64_t n, int elem_bytes);
/// Like strided_copy, converting element types (f32 -> bf16 rounds to nearest even, NaN stays NaN).
[[nodiscard]] cudaError_t convert(cudaStream_t stream, const void* src, ElemType src_type,
                                  const TensorLayout& src_layout, void* dst, ElemType dst_type,
                                  const TensorLayout& dst_layout, int64_t n);
/// Zeroes the n logical elements of a (possibly non-dense) strided tensor.
[[nodiscard]] cudaError_t strided_zero(cudaStream_t stream, void* dst, const TensorLayout& layout, int64_t n,
                                       int elem_bytes);

}  // namespace lathe::kernels
