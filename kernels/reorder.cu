// Strided copy, dtype conversion and strided zero-fill kernels (see reorder.cuh). These are the
// fallback paths for layouts that differ; dense same-layout copies go through cudaMemcpyAsync.
#include "kernels/reorder.cuh"

#include <cuda_fp16.h>

#include "kernels/kernel_common.cuh"

namespace lathe::kernels {

// ------------------------------------------------------------------ kernels
namespace {

template <class T>
__global__ void strided_copy_kernel(const T* src, TensorLayout sl, T* dst, TensorLayout dl, int64_t n) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads())
    dst[detail::offset_of(dl, i)] = src[detail::offset_of(sl, i)];
}

template <class T>
__global__ void strided_zero_kernel(T* dst, TensorLayout dl, int64_t n) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads())
    dst[detail::offset_of(dl, i)] = T(0);
}

// Same rounding as lathe::f32_to_bf16 on the host, so host and device conversions agree bit for bit.
__device__ __forceinline__ uint16_t to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

__device__ __forceinline__ float load_as_f32(const void* p, ElemType t, int64_t off) {
  switch (t) {
    case ElemType::f32:
      return static_cast<const float*>(p)[off];
    case ElemType::bf16:
      return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(p)[off]) << 16);
    case ElemType::f16:
      return __half2float(__ushort_as_half(static_cast<const uint16_t*>(p)[off]));
  }
  return 0.0f;
}

__device__ __forceinline__ void store_from_f32(void* p, ElemType t, int64_t off, float v) {
  switch (t) {
    case ElemType::f32:
      static_cast<float*>(p)[off] = v;
      break;
    case ElemType::bf16:
      static_cast<uint16_t*>(p)[off] = to_bf16_bits(v);
      break;
    case ElemType::f16:
      static_cast<uint16_t*>(p)[off] = __half_as_ushort(__float2half_rn(v));
      break;
  }
}

__global__ void convert_kernel(const void* src, ElemType st, TensorLayout sl, void* dst, ElemType dt, TensorLayout dl,
                               int64_t n) {
  for (int64_t i = detail::global_thread(); i < n; i += detail::grid_threads())
    store_from_f32(dst, dt, detail::offset_of(dl, i), load_as_f32(src, st, detail::offset_of(sl, i)));
}

}  // namespace

// ------------------------------------------------------------------ launchers
cudaError_t strided_copy(cudaStream_t stream, const void* src, const TensorLayout& src_layout, void* dst,
                         const TensorLayout& dst_layout, int64_t n, int elem_bytes) {
  if (n <= 0)
    return cudaSuccess;
  const int grid = detail::grid_for(n);
  switch (elem_bytes) {
    case 1:
      strided_copy_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<const uint8_t*>(src), src_layout,
                                                               static_cast<uint8_t*>(dst), dst_layout, n);
      break;
    case 2:
      strided_copy_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<const uint16_t*>(src), src_layout,
                                                               static_cast<uint16_t*>(dst), dst_layout, n);
      break;
    case 4:
      strided_copy_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<const uint32_t*>(src), src_layout,
                                                               static_cast<uint32_t*>(dst), dst_layout, n);
      break;
    case 8:
      strided_copy_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<const uint64_t*>(src), src_layout,
                                                               static_cast<uint64_t*>(dst), dst_layout, n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t convert(cudaStream_t stream, const void* src, ElemType src_type, const TensorLayout& src_layout, void* dst,
                    ElemType dst_type, const TensorLayout& dst_layout, int64_t n) {
  if (n <= 0)
    return cudaSuccess;
  convert_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(src, src_type, src_layout, dst, dst_type,
                                                                     dst_layout, n);
  return cudaGetLastError();
}

cudaError_t strided_zero(cudaStream_t stream, void* dst, const TensorLayout& layout, int64_t n, int elem_bytes) {
  if (n <= 0)
    return cudaSuccess;
  const int grid = detail::grid_for(n);
  switch (elem_bytes) {
    case 1:
      strided_zero_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<uint8_t*>(dst), layout, n);
      break;
    case 2:
      strided_zero_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<uint16_t*>(dst), layout, n);
      break;
    case 4:
      strided_zero_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<uint32_t*>(dst), layout, n);
      break;
    case 8:
      strided_zero_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<uint64_t*>(dst), layout, n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace lathe::kernels
