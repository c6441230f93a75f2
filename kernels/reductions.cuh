// Launchers for whole-tensor reductions of dense f32 data, accumulated in double: sum and sum of
// squares. Two passes with a fixed grid for a given n, so results are reproducible run to run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lathe::kernels {

/// Bytes of device scratch reduce_sum needs (independent of n).
size_t reduce_scratch_bytes();

/// *result = sum of src[i] (or src[i]^2 when `squares`) over n elements, in double.
[[nodiscard]] cudaError_t reduce_sum(cudaStream_t stream, const float* src, int64_t n, bool squares, void* scratch,
                                     double* result);

}  // namespace lathe::kernels
