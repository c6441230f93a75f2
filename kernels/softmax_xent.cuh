// Launcher for the fused softmax cross-entropy over logits [rows, cols]: per-row loss
// (log-sum-exp minus the label's logit), argmax == label, and optionally the gradient
// grad_scale * (softmax - onehot). The totals are reduced deterministically on the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lathe::kernels {

/// What softmax_xent leaves in device memory for the host to read back.
struct XentTotals {
  double loss_sum;
  unsigned long long correct;
  unsigned long long bad_labels;  // labels outside [0, cols); their rows add nothing
};

/// Bytes of device scratch softmax_xent needs for `rows` rows.
size_t softmax_xent_scratch_bytes(int64_t rows);

/// logits row r at logits + r * ld; diff (may be null) row r at diff + r * diff_ld.
[[nodiscard]] cudaError_t softmax_xent(cudaStream_t stream, const float* logits, int64_t rows, int64_t cols, int64_t ld,
                                       const int32_t* labels, float* diff, int64_t diff_ld, float grad_scale,
                                       void* scratch, XentTotals* totals);

}  // namespace lathe::kernels
