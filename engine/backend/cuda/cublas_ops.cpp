// Linear layers on cuBLAS (see cublas_ops.h).
//
// Row-major <-> column-major: cuBLAS reads a row-major [R, C] matrix with leading dimension ld as
// the column-major matrix M^T (C x R). So for row-major C = op(A) op(B) we ask cuBLAS for
// C^T = op(B)^T op(A)^T, whose column-major storage is exactly row-major C: no copies, only the
// operand order and transpose flags change. A tensor whose row stride is 1 (a transposed view) is
// column-major already and flips its flag instead.
//
// Mixed precision: bf16/f16 operands run on cublasGemmEx with f32 accumulation and f32 results
// (tensor cores). Tensor cores want every GEMM dimension a multiple of 8 and 16-byte aligned rows
// for 2-byte types: operands that are not are copied into zero-padded buffers (the zeros add
// nothing to the sums) and the result is computed padded and its window copied out.
#include "engine/backend/cuda/cublas_ops.h"

#include <climits>
#include <cstdint>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "engine/backend/cuda/cuda_tensor_util.h"
#include "kernels/bias_act.cuh"

namespace lathe::cuda {

namespace {

/// How a logical 2-D matrix lies in memory, in cuBLAS terms.
struct MatrixView {
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t ld = 0;
  bool row_major = true;
  DType dtype = DType::f32;
};

/// The view of `t`, or of a contiguous copy kept alive in `keep` when its strides fit neither form.
MatrixView view_of(CudaContext& ctx, const Tensor& t, Tensor& keep) {
  LATHE_CHECK(t.ndim() == 2, "linear: expected a 2-D tensor, got ", t.describe());
  const int64_t R = t.dim(0), C = t.dim(1), s0 = t.stride(0), s1 = t.stride(1);
  if ((s1 == 1 || C == 1) && s0 >= std::max<int64_t>(C, 1))
    return {t.raw(), R, C, s0, true, t.dtype()};
  if ((s0 == 1 || R == 1) && s1 >= std::max<int64_t>(R, 1))
    return {t.raw(), R, C, s1, false, t.dtype()};
  if (R <= 1 && C <= 1)
    return {t.raw(), R, C, 1, true, t.dtype()};
  keep = make_contiguous(ctx, t);
  return {keep.raw(), R, C, std::max<int64_t>(C, 1), true, t.dtype()};
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

/// Checks that op(A) op(B) chains into C [c_rows, c_cols] and settles the empty cases (an empty C;
/// an empty inner dimension: C = 0). True when nothing is left to compute.
bool gemm_is_trivial(CudaContext& ctx, const MatrixView& a, bool ta, const MatrixView& b, bool tb, float* c,
                     int64_t c_rows, int64_t c_cols, int64_t ldc, float beta) {
  const int64_t inner = ta ? a.rows : a.cols;
  LATHE_CHECK((tb ? b.cols : b.rows) == inner && (ta ? a.cols : a.rows) == c_rows && (tb ? b.rows : b.cols) == c_cols,
              "gemm: shapes do not chain");
  if (c_rows == 0 || c_cols == 0)
    return true;
  const StreamScope scope = ctx.activate();
  if (inner != 0)
    return false;
  LATHE_CHECK(beta == 0.0f, "gemm: empty inner dimension with beta != 0");
  LATHE_CUDA_CHECK(cudaMemset2DAsync(c, ldc * sizeof(float), 0, c_cols * sizeof(float), c_rows, ctx.stream()));
  return true;
}

void gemm_views(CudaContext& ctx, const MatrixView& a, bool ta, const MatrixView& b, bool tb, float* c, int64_t c_rows,
                int64_t c_cols, int64_t ldc, float alpha, float beta) {
  if (gemm_is_trivial(ctx, a, ta, b, tb, c, c_rows, c_cols, ldc, beta))
    return;
  const int64_t inner = ta ? a.rows : a.cols;
  // Column-major C^T (c_cols x c_rows) = op(B)^T op(A)^T. cuBLAS stores a row-major operand as its
  // transpose, so op(X)^T is "as stored" (OP_N) exactly when row_major != transposed.
  const cublasOperation_t op_b = b.row_major != tb ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_a = a.row_major != ta ? CUBLAS_OP_N : CUBLAS_OP_T;
  LATHE_CUBLAS_CHECK(cublasSgemm(ctx.cublas(), op_b, op_a, checked_int(c_cols, "columns"), checked_int(c_rows, "rows"),
                                 checked_int(inner, "inner dimension"), &alpha, static_cast<const float*>(b.data),
                                 checked_int(b.ld, "ld"), static_cast<const float*>(a.data), checked_int(a.ld, "ld"),
                                 &beta, c, checked_int(ldc, "ldc")));
}

int64_t round8(int64_t v) { return (v + 7) / 8 * 8; }
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// `v` itself when its stored matrix (rows x cols, row-major, leading dimension ld) has both sizes
/// and ld multiples of 8 and 16-byte aligned rows; else a zero-padded copy in `keep`.
MatrixView padded_for_tensor_cores(CudaContext& ctx, const MatrixView& v, Tensor& keep) {
  const int64_t rows = v.row_major ? v.rows : v.cols, cols = v.row_major ? v.cols : v.rows;
  if (rows % 8 == 0 && cols % 8 == 0 && v.ld % 8 == 0 && aligned16(v.data))
    return v;
  const int64_t pr = round8(rows), pc = round8(cols);
  const size_t es = dtype_size(v.dtype);
  keep = device_empty(ctx, {pr, pc}, v.dtype);
  LATHE_CUDA_CHECK(cudaMemsetAsync(keep.raw(), 0, keep.nbytes(), ctx.stream()));
  if (rows > 0 && cols > 0)
    LATHE_CUDA_CHECK(cudaMemcpy2DAsync(keep.raw(), pc * es, v.data, v.ld * es, cols * es, rows,
                                       cudaMemcpyDeviceToDevice, ctx.stream()));
  MatrixView p = v;
  p.data = keep.raw();
  p.ld = pc;
  p.rows = v.row_major ? pr : pc;
  p.cols = v.row_major ? pc : pr;
  return p;
}

cudaDataType_t cuda_type(DType dt) { return dt == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F; }

/// C = op(A) op(B) for bf16/f16 A and B (one dtype), f32 accumulation and f32 row-major C, on tensor
/// cores: padded operands (padded_for_tensor_cores), and C computed padded when its sizes are not
/// multiples of 8, then its [c_rows, c_cols] window copied out.
void gemm_half(CudaContext& ctx, const MatrixView& a, bool ta, const MatrixView& b, bool tb, float* c, int64_t c_rows,
               int64_t c_cols, int64_t ldc) {
  LATHE_CHECK(a.dtype == b.dtype && is_half(a.dtype), "gemm: mixed-precision operands must share bf16 or f16, got ",
              dtype_name(a.dtype), " and ", dtype_name(b.dtype));
  if (gemm_is_trivial(ctx, a, ta, b, tb, c, c_rows, c_cols, ldc, 0.0f))
    return;
  Tensor ka, kb, kc;
  const MatrixView pa = padded_for_tensor_cores(ctx, a, ka), pb = padded_for_tensor_cores(ctx, b, kb);
  const int64_t M = ta ? pa.cols : pa.rows, K = ta ? pa.rows : pa.cols, N = tb ? pb.rows : pb.cols;
  LATHE_CHECK((tb ? pb.cols : pb.rows) == K, "gemm: padded inner dimensions differ");
  float* out = c;
  int64_t ldo = ldc;
  if (M != c_rows || N != c_cols || ldc % 4 != 0 || !aligned16(c)) {
    kc = device_empty(ctx, {M, N}, DType::f32);
    out = ptr<float>(kc);
    ldo = N;
  }
  const cublasOperation_t op_b = pb.row_major != tb ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_a = pa.row_major != ta ? CUBLAS_OP_N : CUBLAS_OP_T;
  const float alpha = 1.0f, beta = 0.0f;
  LATHE_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), op_b, op_a, checked_int(N, "columns"), checked_int(M, "rows"),
                                  checked_int(K, "inner dimension"), &alpha, pb.data, cuda_type(pb.dtype),
                                  checked_int(pb.ld, "ld"), pa.data, cuda_type(pa.dtype), checked_int(pa.ld, "ld"),
                                  &beta, out, CUDA_R_32F, checked_int(ldo, "ldc"), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
  if (out != c)
    LATHE_CUDA_CHECK(cudaMemcpy2DAsync(c, ldc * sizeof(float), out, ldo * sizeof(float), c_cols * sizeof(float), c_rows,
                                       cudaMemcpyDeviceToDevice, ctx.stream()));
}

/// C = op(A) op(B) into f32 C: SGEMM for f32 operands, gemm_half for bf16/f16.
void gemm(CudaContext& ctx, const MatrixView& a, bool ta, const MatrixView& b, bool tb, float* c, int64_t c_rows,
          int64_t c_cols, int64_t ldc) {
  if (is_half(a.dtype))
    gemm_half(ctx, a, ta, b, tb, c, c_rows, c_cols, ldc);
  else
    gemm_views(ctx, a, ta, b, tb, c, c_rows, c_cols, ldc, 1.0f, 0.0f);
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
  // Shapes: the op contract, checked once by Backend::linear_forward (op_contract.h).
  check_matmul_operands(ctx, src, weights, dst, "linear_forward");
  Tensor bias_c;
  if (bias) {
    check_f32(ctx, *bias, "linear_forward bias");
    bias_c = make_contiguous(ctx, *bias);
  }
  Tensor ks, kw;
  const MatrixView x = view_of(ctx, src, ks), w = view_of(ctx, weights, kw);
  OutputView out = output_of(ctx, dst);
  const int64_t ld = row_ld(out.target);
  gemm(ctx, x, false, w, true, ptr<float>(out.target), dst.dim(0), dst.dim(1), ld);
  LATHE_CUDA_CHECK(kernels::bias_act(ctx.stream(), ptr<float>(out.target), dst.dim(0), dst.dim(1), 1, ld,
                                     bias ? ptr<float>(bias_c) : nullptr, post == PostOp::relu));
  finish(ctx, out, dst);
}

void linear_backward_data(CudaContext& ctx, const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) {
  // Shapes: the op contract, checked once by Backend::linear_backward_data (op_contract.h).
  check_matmul_operands(ctx, diff_dst, weights, diff_src, "linear_backward_data");
  Tensor kd, kw;
  const MatrixView dy = view_of(ctx, diff_dst, kd), w = view_of(ctx, weights, kw);
  OutputView out = output_of(ctx, diff_src);
  gemm(ctx, dy, false, w, false, ptr<float>(out.target), diff_src.dim(0), diff_src.dim(1), row_ld(out.target));
  finish(ctx, out, diff_src);
}

void linear_backward_weights(CudaContext& ctx, const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                             Tensor* diff_bias) {
  // Shapes: the op contract, checked once by Backend::linear_backward_weights (op_contract.h).
  check_matmul_operands(ctx, src, diff_dst, diff_weights, "linear_backward_weights");
  Tensor ks, kd;
  const MatrixView x = view_of(ctx, src, ks), dy = view_of(ctx, diff_dst, kd);
  OutputView out = output_of(ctx, diff_weights);
  gemm(ctx, dy, true, x, false, ptr<float>(out.target), diff_weights.dim(0), diff_weights.dim(1), row_ld(out.target));
  finish(ctx, out, diff_weights);
  if (diff_bias) {
    check_f32(ctx, *diff_bias, "linear_backward_weights diff_bias");
    LATHE_CHECK(diff_bias->ndim() == 1 && diff_bias->dim(0) == diff_dst.dim(1), "linear_backward_weights: diff_bias ",
                diff_bias->describe(), " does not match ", diff_dst.dim(1), " outputs");
    Tensor dyc = make_contiguous(ctx, diff_dst);
    if (is_half(dyc.dtype())) {  // f32 sums of the bf16/f16 gradient
      Tensor wide = device_empty(ctx, dyc.shape(), DType::f32);
      device_convert(ctx, dyc, wide);
      dyc = wide;
    }
    const int64_t N = diff_dst.dim(0), O = diff_dst.dim(1);
    Tensor db = make_contiguous(ctx, *diff_bias);  // itself when dense (the usual case)
    void* scratch = ctx.scratch(kernels::channel_sums_scratch_bytes(N, O, 1));
    LATHE_CUDA_CHECK(kernels::channel_sums(ctx.stream(), ptr<float>(dyc), N, O, 1, O, ptr<float>(db), scratch));
    if (!db.same_memory(*diff_bias))
      device_strided_copy(ctx, db, *diff_bias);
  }
}

}  // namespace lathe::cuda
