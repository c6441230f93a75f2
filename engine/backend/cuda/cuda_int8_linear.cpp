// CudaInt8Linear: cuBLASLt int8 GEMM (TN, int32 accumulate) plus our pack and epilogue kernels
// (see cuda_int8_linear.h).
#include "engine/backend/cuda/cuda_int8_linear.h"

#include <cublasLt.h>

#include <cstring>
#include <utility>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "kernels/int8_gemm_io.cuh"

namespace lathe::cuda {

namespace {

constexpr int64_t kPad = 16;  // K and O padded to multiples of 16 (int8 tensor-core tiles, aligned rows)
constexpr size_t kMaxWorkspace = size_t{32} << 20;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

}  // namespace

struct CudaInt8Linear::Impl {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  int64_t n = -1;                       // the batch the B/C layouts and the algorithm are for
  Tensor w, comp, bias_acc, out_scale;  // device: s8 [Op, Kp], s32 [Op], f32 [Op], f32 [Op]
  Tensor packed, acc;                   // device: s8 [N, Kp], s32 [N, Op]

  /// Layouts, buffers and the algorithm for batch size n, installed together once all of them were
  /// made: a failure (no heuristic for this n, out of memory) leaves the previous batch's state whole.
  void prepare_batch(CudaBackend& be, int64_t n, int64_t kp, int64_t op_rows);

  ~Impl() {
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (op)
      cublasLtMatmulDescDestroy(op);
    if (lt)
      cublasLtDestroy(lt);
  }
};

namespace {

/// A cuBLASLt matrix layout destroyed with its scope unless released.
struct OwnedLayout {
  cublasLtMatrixLayout_t layout = nullptr;
  OwnedLayout() = default;
  OwnedLayout(const OwnedLayout&) = delete;
  OwnedLayout& operator=(const OwnedLayout&) = delete;
  ~OwnedLayout() {
    if (layout)
      cublasLtMatrixLayoutDestroy(layout);
  }
  cublasLtMatrixLayout_t release() { return std::exchange(layout, nullptr); }
};

/// A matmul preference destroyed with its scope.
struct OwnedPreference {
  cublasLtMatmulPreference_t pref = nullptr;
  OwnedPreference() = default;
  OwnedPreference(const OwnedPreference&) = delete;
  OwnedPreference& operator=(const OwnedPreference&) = delete;
  ~OwnedPreference() {
    if (pref)
      cublasLtMatmulPreferenceDestroy(pref);
  }
};

}  // namespace

void CudaInt8Linear::Impl::prepare_batch(CudaBackend& be, int64_t n, int64_t kp, int64_t op_rows) {
  OwnedLayout new_b, new_c;
  LATHE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&new_b.layout, CUDA_R_8I, kp, n, kp));
  LATHE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&new_c.layout, CUDA_R_32I, op_rows, n, op_rows));
  OwnedPreference pref;
  LATHE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.pref));
  LATHE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &kMaxWorkspace, sizeof(kMaxWorkspace)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  LATHE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, a, new_b.layout, new_c.layout, new_c.layout, pref.pref, 1,
                                                    &result, &found));
  LATHE_CHECK(found > 0, "CudaInt8Linear: cuBLASLt has no int8 GEMM for O ", op_rows, ", K ", kp, ", N ", n,
              " on this GPU");
  Tensor new_packed = be.empty({n, kp}, DType::s8);
  Tensor new_acc = be.empty({n, op_rows}, DType::s32);
  // Everything for n exists: install it in one go (nothing below throws).
  if (b)
    cublasLtMatrixLayoutDestroy(b);
  if (c)
    cublasLtMatrixLayoutDestroy(c);
  b = new_b.release();
  c = new_c.release();
  packed = std::move(new_packed);
  acc = std::move(new_acc);
  algo = result.algo;
  workspace = result.workspaceSize;
  this->n = n;
}

CudaInt8Linear::CudaInt8Linear(CudaBackend& backend, const Int8LayerData& layer)
    : m_be(backend), m_layer(layer), m_impl(std::make_unique<Impl>()) {
  const Tensor& wq = layer.weights_q;
  LATHE_CHECK(wq.device().is_cpu() && wq.dtype() == DType::s8 && wq.ndim() == 2 && wq.is_contiguous(),
              "CudaInt8Linear: weights must be host s8 [O, K] (make_int8_layer), got ", wq.describe());
  LATHE_CHECK(!layer.config.src.per_channel() && layer.config.src.bits == 8,
              "CudaInt8Linear: src parameters must be 8-bit per tensor, got ", layer.config.src.describe());
  m_o = wq.dim(0);
  m_k = wq.dim(1);
  m_kp = round_up(m_k, kPad);
  m_op = round_up(m_o, kPad);
  CudaContext& ctx = m_be.context();
  const StreamScope scope = ctx.activate();

  // Weights padded with zeros; the compensation of the u8 -> s8 shift and of the src zero point.
  const bool src_unsigned = !layer.config.src.is_signed;
  const int32_t zx = layer.config.src.zero_point[0];
  const int32_t shift = src_unsigned ? 128 - zx : -zx;  // sum (q - z) w = sum (packed) w + shift * sum w
  Tensor hw = Tensor::zeros({m_op, m_kp}, DType::s8);
  Tensor hcomp = Tensor::zeros({m_op}, DType::s32), hbias = Tensor::zeros({m_op}, DType::f32),
         hscale = Tensor::zeros({m_op}, DType::f32);
  const int8_t* src_w = wq.data<int8_t>();
  for (int64_t o = 0; o < m_o; ++o) {
    int64_t sum = 0;
    for (int64_t k = 0; k < m_k; ++k) {
      hw.data<int8_t>()[o * m_kp + k] = src_w[o * m_k + k];
      sum += src_w[o * m_k + k];
    }
    hcomp.data<int32_t>()[o] = static_cast<int32_t>(shift * sum);
    hbias.data<float>()[o] = layer.bias_acc[o];
    hscale.data<float>()[o] = layer.output_scales[o];
  }
  Impl& im = *m_impl;
  im.w = m_be.empty(hw.shape(), DType::s8);
  im.comp = m_be.empty(hcomp.shape(), DType::s32);
  im.bias_acc = m_be.empty(hbias.shape(), DType::f32);
  im.out_scale = m_be.empty(hscale.shape(), DType::f32);
  m_be.copy(hw, im.w);
  m_be.copy(hcomp, im.comp);
  m_be.copy(hbias, im.bias_acc);
  m_be.copy(hscale, im.out_scale);

  LATHE_CUBLAS_CHECK(cublasLtCreate(&im.lt));
  LATHE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&im.op, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  // Row-major C[N, O] = X[N, K] W[O, K]^T is column-major C^T (O x N) = W (O x K) X^T (K x N):
  // A = W stored column-major K x O (transposed: "T"), B = X stored column-major K x N ("N").
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LATHE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LATHE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(im.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  LATHE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&im.a, CUDA_R_8I, m_kp, m_op, m_kp));
}

CudaInt8Linear::~CudaInt8Linear() = default;

Tensor CudaInt8Linear::forward(const Tensor& src) {
  Tensor dst = m_be.empty({src.ndim() == 2 ? src.dim(0) : 0, m_o}, m_layer.dst_dtype());
  forward_into(src, dst.raw());
  return dst;
}

void CudaInt8Linear::forward_into(const Tensor& src, void* dst) {
  LATHE_CHECK(!src.device().is_cpu() && src.dtype() == m_layer.src_dtype() && src.ndim() == 2 && src.dim(1) == m_k &&
                  src.stride(1) == 1,
              "CudaInt8Linear::forward: src must be device ", dtype_name(m_layer.src_dtype()), " [N, ", m_k,
              "] with unit column stride, got ", src.describe());
  forward_rows(src.raw(), src.dtype(), src.dim(0), src.stride(0), dst);
}

void CudaInt8Linear::forward_rows(const void* src, DType src_dtype, int64_t n, int64_t ld_src, void* dst) {
  LATHE_CHECK(src_dtype == m_layer.src_dtype() && n >= 0 && ld_src >= m_k, "CudaInt8Linear::forward_rows: ", n,
              " rows of ", dtype_name(src_dtype), " with leading dimension ", ld_src, " do not fit [N, ", m_k, "] ",
              dtype_name(m_layer.src_dtype()));
  CudaContext& ctx = m_be.context();
  const StreamScope scope = ctx.activate();
  if (n == 0)
    return;  // no rows, nothing to write (and cuBLASLt takes no empty layouts)
  Impl& im = *m_impl;
  if (n != im.n)
    m_impl->prepare_batch(m_be, n, m_kp, m_op);
  cudaStream_t stream = ctx.stream();
  LATHE_CUDA_CHECK(kernels::int8_pack_rows(stream, src, src_dtype == DType::u8, n, m_k, ld_src,
                                           static_cast<int8_t*>(im.packed.raw()), m_kp));
  const int32_t alpha = 1, beta = 0;
  void* ws = im.workspace ? ctx.workspace(im.workspace) : nullptr;
  LATHE_CUBLAS_CHECK(cublasLtMatmul(im.lt, im.op, &alpha, im.w.raw(), im.a, im.packed.raw(), im.b, &beta, im.acc.raw(),
                                    im.c, im.acc.raw(), im.c, &im.algo, ws, im.workspace, stream));
  const auto& dst_q = m_layer.config.dst;
  const kernels::Int8Out out =
      !dst_q ? kernels::Int8Out::f32 : (dst_q->is_signed ? kernels::Int8Out::s8 : kernels::Int8Out::u8);
  LATHE_CUDA_CHECK(kernels::int8_epilogue(
      stream, static_cast<const int32_t*>(im.acc.raw()), n, m_o, m_op, static_cast<const int32_t*>(im.comp.raw()),
      static_cast<const float*>(im.bias_acc.raw()), static_cast<const float*>(im.out_scale.raw()),
      m_layer.config.post == PostOp::relu, out, dst_q ? static_cast<float>(dst_q->zero_point[0]) : 0.0f,
      dst_q ? dst_q->qmin() : 0, dst_q ? dst_q->qmax() : 0, dst));
}

// ---- convolution as im2col + GEMM ----

namespace {

/// The conv layer with its weights [O, C, KH, KW] reordered to [O, KH * KW * C] (im2col order).
Int8LayerData as_gemm_layer(const Int8LayerData& layer) {
  const Tensor& w = layer.weights_q;
  LATHE_CHECK(w.device().is_cpu() && w.dtype() == DType::s8 && w.ndim() == 4 && w.is_contiguous(),
              "CudaInt8Conv2d: weights must be host s8 [O, C, KH, KW] (make_int8_layer), got ", w.describe());
  const int64_t O = w.dim(0), C = w.dim(1), KH = w.dim(2), KW = w.dim(3);
  Int8LayerData g = layer;
  g.weights_q = Tensor::empty({O, KH * KW * C}, DType::s8);
  const int8_t* s = w.data<int8_t>();
  int8_t* d = g.weights_q.data<int8_t>();
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < KH; ++y)
        for (int64_t x = 0; x < KW; ++x)
          d[o * KH * KW * C + (y * KW + x) * C + c] = s[((o * C + c) * KH + y) * KW + x];
  return g;
}

}  // namespace

CudaInt8Conv2d::CudaInt8Conv2d(CudaBackend& backend, const Int8LayerData& layer, const ConvParams& params)
    : m_be(backend),
      m_p(params),
      m_c(layer.weights_q.ndim() == 4 ? layer.weights_q.dim(1) : 0),
      m_kh(layer.weights_q.ndim() == 4 ? layer.weights_q.dim(2) : 0),
      m_kw(layer.weights_q.ndim() == 4 ? layer.weights_q.dim(3) : 0),
      m_pad(static_cast<uint8_t>(layer.config.src.zero_point.empty() ? 0 : layer.config.src.zero_point[0])),
      m_src_dtype(layer.src_dtype()),
      m_dst_dtype(layer.dst_dtype()),
      m_gemm(std::make_unique<CudaInt8Linear>(backend, as_gemm_layer(layer))) {}

CudaInt8Conv2d::~CudaInt8Conv2d() = default;

Tensor CudaInt8Conv2d::forward(const Tensor& src) {
  LATHE_CHECK(!src.device().is_cpu() && src.dtype() == m_src_dtype && src.ndim() == 4 && src.dim(1) == m_c &&
                  src.is_channels_last(),
              "CudaInt8Conv2d::forward: src must be device ", dtype_name(m_src_dtype), " [N, ", m_c,
              ", H, W] channels-last, got ", src.describe());
  const int64_t n = src.dim(0), h = src.dim(2), w = src.dim(3);
  const int64_t oh = conv_out_size(h, m_kh, m_p.stride_h, m_p.pad_h),
                ow = conv_out_size(w, m_kw, m_p.stride_w, m_p.pad_w);
  const Shape cols_shape{n * oh * ow, m_kh * m_kw * m_c};
  if (!m_cols.defined() || m_cols.shape() != cols_shape || m_cols.dtype() != m_src_dtype)
    m_cols = m_be.empty(cols_shape, m_src_dtype);
  CudaContext& ctx = m_be.context();
  const StreamScope scope = ctx.activate();
  LATHE_CUDA_CHECK(kernels::int8_im2col_nhwc(ctx.stream(), static_cast<const uint8_t*>(src.raw()), n, m_c, h, w,
                                             src.stride(0), src.stride(2), src.stride(3), m_kh, m_kw, m_p.stride_h,
                                             m_p.stride_w, m_p.pad_h, m_p.pad_w, oh, ow, m_pad,
                                             static_cast<uint8_t*>(m_cols.raw())));
  Tensor dst = m_be.empty({n, m_gemm->out_features(), oh, ow}, m_dst_dtype, MemoryFormat::channels_last);
  m_gemm->forward_into(m_cols, dst.raw());  // rows (n, oh, ow) x channels: the channels-last memory
  return dst;
}

}  // namespace lathe::cuda
