// Linear layers on cuBLAS (see cublas_ops.h).
//
// Row-major <-> column-major: cuBLAS reads a row-major [R, C] matrix with leading dimension ld as
// the column-major matrix M^T (C x R). So for row-major C = op(A) op(B) we ask cuBLAS for
// C^T = op(B)^T op(A)^T, whose column-major storage is exactly row-major C: no copies, only the
// operand order and transpose flags change. A tensor whose row stride is 1 (a transposed view) is
// column-major already and flips its flag instead.
#include "engine/backend/cuda/cublas_ops.h"

#include <climits>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "engine/backend/cuda/cuda_tensor_util.h"
#include "kernels/bias_act.cuh"

namespace lathe::cuda {

namespace {

/// How a logical 2-D matrix lies in memory, in cuBLAS terms.
struct MatrixView {
  const float* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t ld = 0;
  bool row_major = true;
};

/// The view of `t`, or of a contiguous copy kept alive in `keep` when its strides fit neither form.
MatrixView view_of(CudaContext& ctx, const Tensor& t, Tensor& keep) {
  LATHE_CHECK(t.ndim() == 2, "linear: expected a 2-D tensor, got ", t.describe());
  const int64_t R = t.dim(0), C = t.dim(1), s0 = t.stride(0), s1 = t.stride(1);
  if ((s1 == 1 || C == 1) && s0 >= std::max<int64_t>(C, 1))
    return {ptr<float>(t), R, C, s0, true};
  if ((s0 == 1 || R == 1) && s1 >= std::max<int64_t>(R, 1))
    return {ptr<float>(t), R, C, s1, false};
  if (R <= 1 && C <= 1)
    return {ptr<float>(t), R, C, 1, true};
  keep = make_contiguous(ctx, t);
  return {ptr<float>(keep), R, C, std::max<int64_t>(C, 1), true};
}

int checked_int(int64_t v, const char* what) {
  LATHE_CHECK(v >= 0 && v <= INT_MAX, "linear: ", what, " = ", v, " exceeds cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}

/// A row-major output view of `dst`, or of a contiguous temporary that `finish` copies back.
struct OutputView {
  Tensor target;  // what the GEMM writes
  bool staged = false;
};

OutputView output_of(CudaContext& ctx, Tensor& dst) {
  const int64_t C = dst.dim(1);
  if ((dst.stride(1) == 1 || C == 1) && dst.stride(0) >= std::max<int64_t>(C, 1))
    return {dst, false};
  return {device_empty(ctx, dst.shape(), DType::f32), true};
}

void finish(CudaContext& ctx, OutputView& out, Tensor& dst) {
  if (out.staged)
    device_strided_copy(ctx, out.target, dst);
}

int64_t row_ld(const Tensor& t) { return std::max<int64_t>(t.dim(0) > 1 ? t.stride(0) : t.dim(1), t.dim(1)); }

void gemm_views(CudaContext& ctx, const MatrixView& a, bool ta, const MatrixView& b, bool tb, float* c, int64_t c_rows,
                int64_t c_cols, int64_t ldc, float alpha, float beta) {
  const int64_t inner = ta ? a.rows : a.cols;
  LATHE_CHECK((tb ? b.cols : b.rows) == inner && (ta ? a.cols : a.rows) == c_rows && (tb ? b.rows : b.cols) == c_cols,
              "sgemm: shapes do not chain");
  if (c_rows == 0 || c_cols == 0)
    return;
  ctx.activate();
  if (inner == 0) {
    LATHE_CHECK(beta == 0.0f, "sgemm: empty inner dimension with beta != 0");
    LATHE_CUDA_CHECK(cudaMemset2DAsync(c, ldc * sizeof(float), 0, c_cols * sizeof(float), c_rows, ctx.stream()));
    return;
  }
  // Column-major C^T (c_cols x c_rows) = op(B)^T op(A)^T. cuBLAS stores a row-major operand as its
  // transpose, so op(X)^T is "as stored" (OP_N) exactly when row_major != transposed.
  const cublasOperation_t op_b = b.row_major != tb ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_a = a.row_major != ta ? CUBLAS_OP_N : CUBLAS_OP_T;
  LATHE_CUBLAS_CHECK(cublasSgemm(ctx.cublas(), op_b, op_a, checked_int(c_cols, "columns"), checked_int(c_rows, "rows"),
                                 checked_int(inner, "inner dimension"), &alpha, b.data, checked_int(b.ld, "ld"), a.data,
                                 checked_int(a.ld, "ld"), &beta, c, checked_int(ldc, "ldc")));
}

}  // namespace

void sgemm(CudaContext& ctx, const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c,
           float alpha, float beta) {
  check_f32(ctx, a, "sgemm");
  check_f32(ctx, b, "sgemm");
  check_f32(ctx, c, "sgemm");
  Tensor ka, kb;
  const MatrixView va = view_of(ctx, a, ka), vb = view_of(ctx, b, kb);
  LATHE_CHECK(c.ndim() == 2 && (c.stride(1) == 1 || c.dim(1) == 1), "sgemm: C must be row-major, got ", c.describe());
  gemm_views(ctx, va, transpose_a, vb, transpose_b, ptr<float>(c), c.dim(0), c.dim(1), row_ld(c), alpha, beta);
}

void linear_forward(CudaContext& ctx, const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                    PostOp post) {
  check_f32(ctx, src, "linear_forward src");
  check_f32(ctx, weights, "linear_forward weights");
  check_f32(ctx, dst, "linear_forward dst");
  LATHE_CHECK(src.ndim() == 2 && weights.ndim() == 2 && dst.ndim() == 2 && src.dim(1) == weights.dim(1) &&
                  dst.dim(0) == src.dim(0) && dst.dim(1) == weights.dim(0),
              "linear_forward shapes: src ", src.describe(), " weights ", weights.describe(), " dst ", dst.describe());
  Tensor bias_c;
  if (bias) {
    check_f32(ctx, *bias, "linear_forward bias");
    LATHE_CHECK(bias->ndim() == 1 && bias->dim(0) == weights.dim(0), "linear_forward: bias ", bias->describe(),
                " does not match ", weights.dim(0), " outputs");
    bias_c = make_contiguous(ctx, *bias);
  }
  Tensor ks, kw;
  const MatrixView x = view_of(ctx, src, ks), w = view_of(ctx, weights, kw);
  OutputView out = output_of(ctx, dst);
  const int64_t ld = row_ld(out.target);
  gemm_views(ctx, x, false, w, true, ptr<float>(out.target), dst.dim(0), dst.dim(1), ld, 1.0f, 0.0f);
  LATHE_CUDA_CHECK(kernels::bias_act(ctx.stream(), ptr<float>(out.target), dst.dim(0), dst.dim(1), 1, ld,
                                     bias ? ptr<float>(bias_c) : nullptr, post == PostOp::relu));
  finish(ctx, out, dst);
}

void linear_backward_data(CudaContext& ctx, const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) {
  check_f32(ctx, diff_dst, "linear_backward_data diff_dst");
  check_f32(ctx, weights, "linear_backward_data weights");
  check_f32(ctx, diff_src, "linear_backward_data diff_src");
  LATHE_CHECK(diff_dst.ndim() == 2 && weights.ndim() == 2 && diff_src.ndim() == 2 &&
                  diff_dst.dim(1) == weights.dim(0) && diff_src.dim(1) == weights.dim(1) &&
                  diff_src.dim(0) == diff_dst.dim(0),
              "linear_backward_data shapes: diff_dst ", diff_dst.describe(), " weights ", weights.describe(),
              " diff_src ", diff_src.describe());
  Tensor kd, kw;
  const MatrixView dy = view_of(ctx, diff_dst, kd), w = view_of(ctx, weights, kw);
  OutputView out = output_of(ctx, diff_src);
  gemm_views(ctx, dy, false, w, false, ptr<float>(out.target), diff_src.dim(0), diff_src.dim(1), row_ld(out.target),
             1.0f, 0.0f);
  finish(ctx, out, diff_src);
}

void linear_backward_weights(CudaContext& ctx, const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                             Tensor* diff_bias) {
  check_f32(ctx, src, "linear_backward_weights src");
  check_f32(ctx, diff_dst, "linear_backward_weights diff_dst");
  check_f32(ctx, diff_weights, "linear_backward_weights diff_weights");
  LATHE_CHECK(src.ndim() == 2 && diff_dst.ndim() == 2 && diff_weights.ndim() == 2 &&
                  diff_weights.dim(0) == diff_dst.dim(1) && diff_weights.dim(1) == src.dim(1) &&
                  src.dim(0) == diff_dst.dim(0),
              "linear_backward_weights shapes: src ", src.describe(), " diff_dst ", diff_dst.describe(),
              " diff_weights ", diff_weights.describe());
  Tensor ks, kd;
  const MatrixView x = view_of(ctx, src, ks), dy = view_of(ctx, diff_dst, kd);
  OutputView out = output_of(ctx, diff_weights);
  gemm_views(ctx, dy, true, x, false, ptr<float>(out.target), diff_weights.dim(0), diff_weights.dim(1),
             row_ld(out.target), 1.0f, 0.0f);
  finish(ctx, out, diff_weights);
  if (diff_bias) {
    check_f32(ctx, *diff_bias, "linear_backward_weights diff_bias");
    LATHE_CHECK(diff_bias->ndim() == 1 && diff_bias->dim(0) == diff_dst.dim(1), "linear_backward_weights: diff_bias ",
                diff_bias->describe(), " does not match ", diff_dst.dim(1), " outputs");
    const Tensor dyc = make_contiguous(ctx, diff_dst);
    const int64_t N = diff_dst.dim(0), O = diff_dst.dim(1);
    Tensor db = make_contiguous(ctx, *diff_bias);  // itself when dense (the usual case)
    void* scratch = ctx.scratch(kernels::channel_sums_scratch_bytes(N, O, 1));
    LATHE_CUDA_CHECK(kernels::channel_sums(ctx.stream(), ptr<float>(dyc), N, O, 1, O, ptr<float>(db), scratch));
    if (!db.same_memory(*diff_bias))
      device_strided_copy(ctx, db, *diff_bias);
  }
}

}  // namespace lathe::cuda
