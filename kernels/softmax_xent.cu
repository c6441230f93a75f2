// Softmax cross-entropy kernels (see softmax_xent.cuh). One warp per row: lanes stride over the
// columns for the max (first index wins ties, like the reference's strict '>'), the sum of
// exponentials and the gradient. Row results go to scratch; one block then sums them in a fixed
// order, so the loss is bit-reproducible run to run.
#include "kernels/softmax_xent.cuh"

#include <algorithm>
#include <cfloat>

#include "kernels/kernel_common.cuh"

namespace lathe::kernels {

// ------------------------------------------------------------------ kernels
namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void xent_rows_kernel(const float* logits, int64_t rows, int64_t cols, int64_t ld, const int32_t* labels,
                                 float* diff, int64_t diff_ld, float grad_scale, double* row_loss,
                                 uint32_t* row_flags) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_total = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); r < rows; r += warps_total) {
    const float* z = logits + r * ld;
    float mx = -FLT_MAX;
    int64_t arg = cols;  // "none yet": loses every tie-break
    for (int64_t c = lane; c < cols; c += 32) {
      const float v = z[c];
      if (arg == cols || v > mx) {
        mx = v;
        arg = c;
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float omx = __shfl_xor_sync(0xffffffffu, mx, off);
      const int64_t oarg = __shfl_xor_sync(0xffffffffu, arg, off);
      if (oarg != cols && (arg == cols || omx > mx || (omx == mx && oarg < arg))) {
        mx = omx;
        arg = oarg;
      }
    }
    float se = 0.0f;
    for (int64_t c = lane; c < cols; c += 32)
      se += expf(z[c] - mx);
    se = detail::warp_sum(se);
    const float lse = mx + logf(se);
    const int32_t y = labels[r];
    const bool ok = y >= 0 && y < cols;
    if (diff) {
      float* g = diff + r * diff_ld;
      for (int64_t c = lane; c < cols; c += 32)
        g[c] = grad_scale * (expf(z[c] - lse) - (ok && c == y ? 1.0f : 0.0f));
    }
    if (lane == 0) {
      row_loss[r] = ok ? static_cast<double>(lse) - static_cast<double>(z[y]) : 0.0;
      row_flags[r] = ok ? (arg == y ? 1u : 0u) : 2u;
    }
  }
}

__global__ void xent_total_kernel(const double* row_loss, const uint32_t* row_flags, int64_t rows, XentTotals* totals) {
  __shared__ double sd[32];
  __shared__ unsigned long long su[32];
  double loss = 0;
  unsigned long long correct = 0, bad = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    loss += row_loss[r];
    correct += row_flags[r] == 1u;
    bad += row_flags[r] == 2u;
  }
  loss = detail::block_sum(loss, sd);
  correct = detail::block_sum(correct, su);
  bad = detail::block_sum(bad, su);
  if (threadIdx.x == 0)
    *totals = XentTotals{loss, correct, bad};
}

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

}  // namespace

// ------------------------------------------------------------------ launchers
size_t softmax_xent_scratch_bytes(int64_t rows) {
  return align256(static_cast<size_t>(rows) * sizeof(double)) + align256(static_cast<size_t>(rows) * sizeof(uint32_t));
}

cudaError_t softmax_xent(cudaStream_t stream, const float* logits, int64_t rows, int64_t cols, int64_t ld,
                         const int32_t* labels, float* diff, int64_t diff_ld, float grad_scale, void* scratch,
                         XentTotals* totals) {
  double* row_loss = static_cast<double*>(scratch);
  uint32_t* row_flags =
      reinterpret_cast<uint32_t*>(static_cast<char*>(scratch) + align256(static_cast<size_t>(rows) * sizeof(double)));
  if (rows > 0 && cols > 0) {
    const int64_t blocks = std::min<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, detail::kMaxBlocks);
    xent_rows_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(
        logits, rows, cols, ld, labels, diff, diff_ld, grad_scale, row_loss, row_flags);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
      return e;
  }
  xent_total_kernel<<<1, 1024, 0, stream>>>(row_loss, row_flags, cols > 0 ? rows : 0, totals);
  return cudaGetLastError();
}

}  // namespace lathe::kernels
