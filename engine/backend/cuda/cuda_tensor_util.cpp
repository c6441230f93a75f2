// Argument checks, layout conversion and layout matching for the CUDA backend (see cuda_tensor_util.h).
#include "engine/backend/cuda/cuda_tensor_util.h"

#include "engine/backend/cuda/cuda_check.h"

namespace lathe::cuda {

void check_on_device(const CudaContext& ctx, const Tensor& t, const char* what) {
  LATHE_CHECK(t.defined(), what, ": tensor is not defined");
  LATHE_CHECK(t.device() == ctx.lathe_device(), what, ": expected a tensor on ", ctx.lathe_device().str(), ", got ",
              t.describe(), " (the CUDA backend does not copy implicitly; use Backend::copy)");
}

void check_f32(const CudaContext& ctx, const Tensor& t, const char* what) {
  check_on_device(ctx, t, what);
  LATHE_CHECK(t.dtype() == DType::f32, what, ": the CUDA backend runs f32, got ", t.describe());
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* what) {
  LATHE_CHECK(a.shape() == b.shape(), what, ": shapes differ: ", a.describe(), " vs ", b.describe());
}

kernels::TensorLayout layout_of(const Tensor& t) {
  LATHE_CHECK(t.ndim() <= kernels::kMaxDims, "CUDA kernels take at most ", kernels::kMaxDims, " dimensions, got ",
              t.describe());
  kernels::TensorLayout l{};
  const int pad = kernels::kMaxDims - t.ndim();
  for (int d = 0; d < kernels::kMaxDims; ++d) {
    l.sizes[d] = d < pad ? 1 : t.dim(d - pad);
    l.strides[d] = d < pad ? 0 : t.stride(d - pad);
  }
  l.contiguous = t.is_contiguous();
  return l;
}

kernels::Dims4 dims4(const Tensor& t) {
  LATHE_CHECK(t.ndim() == 4, "expected a 4-D [N, C, H, W] tensor, got ", t.describe());
  return {t.dim(0), t.dim(1), t.dim(2), t.dim(3)};
}

kernels::Strides4 strides4(const Tensor& t) {
  LATHE_CHECK(t.ndim() == 4, "expected a 4-D [N, C, H, W] tensor, got ", t.describe());
  return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

bool same_dense_layout(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || !a.is_dense() || !b.is_dense())
    return false;
  for (int d = 0; d < a.ndim(); ++d)
    if (a.dim(d) > 1 && a.stride(d) != b.stride(d))
      return false;
  return true;
}

namespace {
bool matches_strides(const Tensor& t, const std::vector<int64_t>& strides) {
  for (int d = 0; d < t.ndim(); ++d)
    if (t.dim(d) > 1 && t.stride(d) != strides[d])
      return false;
  return true;
}
}  // namespace

bool is_standard_dense(const Tensor& t) {
  if (matches_strides(t, contiguous_strides(t.shape())))
    return true;
  return t.ndim() == 4 && matches_strides(t, channels_last_strides(t.shape()));
}

bool has_layout(const Tensor& t, MemoryFormat format) {
  if (!t.is_dense())
    return false;
  if (format == MemoryFormat::contiguous)
    return matches_strides(t, contiguous_strides(t.shape()));
  return t.ndim() == 4 && matches_strides(t, channels_last_strides(t.shape()));
}

MemoryFormat standard_format(const Tensor& t) {
  if (matches_strides(t, contiguous_strides(t.shape())))
    return MemoryFormat::contiguous;
  LATHE_CHECK(t.ndim() == 4 && matches_strides(t, channels_last_strides(t.shape())),
              "tensor is neither contiguous nor channels-last: ", t.describe());
  return MemoryFormat::channels_last;
}

Tensor device_empty(const CudaContext& ctx, const Shape& shape, DType dtype, MemoryFormat format) {
  return Tensor::empty(shape, dtype, ctx.lathe_device(), format);
}

void device_strided_copy(CudaContext& ctx, const Tensor& src, Tensor& dst) {
  check_on_device(ctx, src, "copy");
  check_on_device(ctx, dst, "copy");
  check_same_shape(src, dst, "copy");
  LATHE_CHECK(src.dtype() == dst.dtype(), "copy: dtypes differ: ", src.describe(), " vs ", dst.describe());
  if (src.numel() == 0)
    return;
  if (same_dense_layout(src, dst)) {
    LATHE_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, ctx.stream()));
    return;
  }
  LATHE_CUDA_CHECK(kernels::strided_copy(ctx.stream(), src.raw(), layout_of(src), dst.raw(), layout_of(dst),
                                         src.numel(), static_cast<int>(dtype_size(src.dtype()))));
}

kernels::ElemType elem_type(DType dt, const char* what) {
  switch (dt) {
    case DType::f32:
      return kernels::ElemType::f32;
    case DType::bf16:
      return kernels::ElemType::bf16;
    case DType::f16:
      return kernels::ElemType::f16;
    default:
      LATHE_FAIL(what, ": the CUDA backend converts between f32, bf16 and f16, got ", dtype_name(dt));
  }
}

void check_matmul_operands(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out, const char* what) {
  if (is_half(a.dtype()) || is_half(b.dtype())) {
    LATHE_CHECK(a.dtype() == b.dtype(), what, ": mixed-precision operands must both be bf16 or both f16, got ",
                a.describe(), " and ", b.describe());
    check_on_device(ctx, a, what);
    check_on_device(ctx, b, what);
  } else {
    check_f32(ctx, a, what);
    check_f32(ctx, b, what);
  }
  check_f32(ctx, out, what);
}

void device_convert(CudaContext& ctx, const Tensor& src, Tensor& dst) {
  check_on_device(ctx, src, "convert");
  check_on_device(ctx, dst, "convert");
  check_same_shape(src, dst, "convert");
  if (src.dtype() == dst.dtype())
    return device_strided_copy(ctx, src, dst);
  if (src.numel() == 0)
    return;
  LATHE_CUDA_CHECK(kernels::convert(ctx.stream(), src.raw(), elem_type(src.dtype(), "convert"), layout_of(src),
                                    dst.raw(), elem_type(dst.dtype(), "convert"), layout_of(dst), src.numel()));
}

Tensor match_layout(CudaContext& ctx, const Tensor& src, const Tensor& like) {
  if (same_dense_layout(src, like))
    return src;
  Tensor out = device_empty(ctx, src.shape(), src.dtype(), standard_format(like));
  device_strided_copy(ctx, src, out);
  return out;
}

Tensor make_contiguous(CudaContext& ctx, const Tensor& src) {
  if (src.is_dense() && matches_strides(src, contiguous_strides(src.shape())))
    return src;
  Tensor out = device_empty(ctx, src.shape(), src.dtype());
  device_strided_copy(ctx, src, out);
  return out;
}

}  // namespace lathe::cuda
