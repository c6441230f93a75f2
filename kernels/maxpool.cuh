// Launchers for 2-D max pooling over [N, C, H, W] f32 tensors of any strides. Forward writes the
// argmax of each window as the flat h*W + w inside its (n, c) plane (s32, dense in logical
// [N, C, OH, OW] order), exactly ReferenceBackend's workspace; the first maximum wins ties, as in
// PyTorch, which matters after ReLU where whole windows are 0. Backward gathers: each input element
// sums the gradients of the windows whose argmax it is, so no atomics and no zero-fill pass.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/batchnorm.cuh"  // Dims4, Strides4

namespace lathe::kernels {

struct PoolWindow {
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

/// `in` = [N, C, H, W] of src, `out_h`/`out_w` the pooled size; channels_last_order walks the
/// elements in NHWC order (coalesced for channels-last tensors).
[[nodiscard]] cudaError_t maxpool2d_forward(cudaStream_t stream, Dims4 in, int64_t out_h, int64_t out_w,
                                            const PoolWindow& win, const float* src, Strides4 src_strides, float* dst,
                                            Strides4 dst_strides, int32_t* argmax, bool channels_last_order);
[[nodiscard]] cudaError_t maxpool2d_backward(cudaStream_t stream, Dims4 in, int64_t out_h, int64_t out_w,
                                             const PoolWindow& win, const float* diff_dst, Strides4 diff_dst_strides,
                                             const int32_t* argmax, float* diff_src, Strides4 diff_src_strides,
                                             bool channels_last_order);

}  // namespace lathe::kernels
