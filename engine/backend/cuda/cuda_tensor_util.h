// Helpers the CUDA backend files share: argument checks that name the op and the tensor, the
// conversion of a Tensor's shape and strides into the kernels' layout structs, and layout matching
// (staging a tensor into another tensor's dense layout with a strided-copy kernel when they differ).
#pragma once

#include "engine/backend/cuda/cuda_context.h"
#include "engine/core/tensor.h"
#include "kernels/batchnorm.cuh"
#include "kernels/reorder.cuh"

namespace lathe::cuda {

/// Throws unless `t` is defined and lives on the context's device.
void check_on_device(const CudaContext& ctx, const Tensor& t, const char* what);
/// check_on_device plus dtype f32.
void check_f32(const CudaContext& ctx, const Tensor& t, const char* what);
void check_same_shape(const Tensor& a, const Tensor& b, const char* what);

kernels::TensorLayout layout_of(const Tensor& t);
kernels::Dims4 dims4(const Tensor& t);
kernels::Strides4 strides4(const Tensor& t);

/// Both dense with the same memory order (strides of size-1 dimensions are ignored), so a flat
/// loop over the memory of one visits the same logical elements as over the other.
bool same_dense_layout(const Tensor& a, const Tensor& b);
/// A dense layout Tensor::empty can make: row-major contiguous or 4-D channels-last (possibly
/// only up to size-1 dimensions).
bool is_standard_dense(const Tensor& t);
/// Whether `t` is dense in `format`'s layout (strides of size-1 dimensions ignored).
bool has_layout(const Tensor& t, MemoryFormat format);
/// The MemoryFormat whose layout `t` has (requires is_standard_dense; contiguous wins when both fit).
MemoryFormat standard_format(const Tensor& t);

/// dst = src elementwise, any layouts, both on the context's device, same shape and dtype.
void device_strided_copy(CudaContext& ctx, const Tensor& src, Tensor& dst);
/// The kernels' element type of an f32, bf16 or f16 tensor; throws naming `what` for any other.
kernels::ElemType elem_type(DType dt, const char* what);
/// bf16 or f16: the operand types of mixed-precision matmuls and convolutions.
inline bool is_half(DType dt) { return dt == DType::bf16 || dt == DType::f16; }
/// The two operands of a matmul or convolution (src / weights, diff_dst / weights, src / diff_dst):
/// both f32, or both bf16 / both f16 (mixed precision), on this device; the result `out` f32.
void check_matmul_operands(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out, const char* what);
/// dst = src converted elementwise (f32, bf16, f16 in any pair; round to nearest even), any
/// layouts, both on the context's device, same shape.
void device_convert(CudaContext& ctx, const Tensor& src, Tensor& dst);
/// `src` itself when it already has `like`'s dense layout, else a device copy in that layout
/// (`like` must be standard dense).
Tensor match_layout(CudaContext& ctx, const Tensor& src, const Tensor& like);
/// `src` itself when contiguous (up to strides of size-1 dimensions), else a contiguous device copy.
Tensor make_contiguous(CudaContext& ctx, const Tensor& src);
/// A new device tensor with `format` (channels_last only for 4-D shapes).
Tensor device_empty(const CudaContext& ctx, const Shape& shape, DType dtype,
                    MemoryFormat format = MemoryFormat::contiguous);

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw());
}

}  // namespace lathe::cuda
