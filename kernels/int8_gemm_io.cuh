// Launchers around the cuBLASLt int8 GEMM of the GPU INT8 linear layer (engine/backend/cuda/
// cuda_int8_linear.h): packing quantized activations into the signed, zero-padded operand cuBLASLt
// takes, and the epilogue that turns int32 accumulators into the layer's output with exactly the
// arithmetic of engine/backend/formats/int8_layer_data.h (so results match the CPU reference bit for bit).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lathe::kernels {

/// dst[r * ld_dst + c] = src[r * ld_src + c] - (src_unsigned ? 128 : 0) for c < cols (u8 or s8
/// src), and 0 for cols <= c < ld_dst (padding that contributes nothing to the dot products).
[[nodiscard]] cudaError_t int8_pack_rows(cudaStream_t stream, const void* src, bool src_unsigned, int64_t rows,
                                         int64_t cols, int64_t ld_src, int8_t* dst, int64_t ld_dst);

/// im2col of a channels-last 8-bit image batch for an INT8 convolution as a GEMM: row
/// (n * OH + oh) * OW + ow, column (kh * KW + kw) * C + c holds x[n, c, oh*sh - ph + kh, ow*sw - pw + kw]
/// (element size 1; `src` strides in elements for n, h, w, the channel stride being 1), and
/// `pad_value` (the zero point: a real 0) outside the image. dst is [N*OH*OW, KH*KW*C] row-major.
[[nodiscard]] cudaError_t int8_im2col_nhwc(cudaStream_t stream, const uint8_t* src, int64_t n, int64_t c, int64_t h,
                                           int64_t w, int64_t stride_n, int64_t stride_h, int64_t stride_w, int64_t kh,
                                           int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t oh,
                                           int64_t ow, uint8_t pad_value, uint8_t* dst);

/// Output kinds of the epilogue.
enum class Int8Out { f32, s8, u8 };

/// For r < rows, o < cols: a = acc[r * ld_acc + o] + comp[o] (int32, exact);
///   y = out_scale[o] * (float(a) + bias_acc[o])  (round-to-nearest, no fused multiply-add),
///   y = max(y, 0) when relu; f32 out: dst = y; s8/u8 out: dst = clamp(rint(y + zero_point), qmin, qmax)
/// (round half to even). dst is row-major with leading dimension `cols`.
[[nodiscard]] cudaError_t int8_epilogue(cudaStream_t stream, const int32_t* acc, int64_t rows, int64_t cols,
                                        int64_t ld_acc, const int32_t* comp, const float* bias_acc,
                                        const float* out_scale, bool relu, Int8Out out, float zero_point, int qmin,
                                        int qmax, void* dst);

/// f32 -> s8/u8: dst[i] = clamp(rint(double(x[i]) / double(scale)) + zero_point, qmin, qmax), NaN -> qmin
/// (quantize_value of engine/backend/formats/quant_params.h).
[[nodiscard]] cudaError_t int8_quantize(cudaStream_t stream, const float* x, int64_t n, float scale, int zero_point,
                                        int qmin, int qmax, bool out_unsigned, void* dst);

}  // namespace lathe::kernels
