// The sparse executors: kernel choice by measurement, the Linear transpose scheme and the im2col
// convolution.
#include "engine/compress/prune/sparse_layers.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "engine/core/timing.h"

namespace lathe {

namespace {

Tensor host_f32_copy(const Tensor& t) {
  LATHE_CHECK(t.device().is_cpu(), "sparse executor: ", t.describe(),
              " is not a host tensor; the sparse kernels run on the CPU");
  Tensor out = Tensor::empty(t.shape(), DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i)
    out.data<float>()[i] = static_cast<float>(t.at_flat(i));
  return out;
}

/// dst [cols, rows] = src [rows, cols] transposed, in 32 x 32 tiles (threads for large matrices).
void transpose_tiled(const float* src, int64_t rows, int64_t cols, float* dst) {
  constexpr int64_t kTile = 32;
#pragma omp parallel for collapse(2) if (rows * cols > 65536)
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(r0 + kTile, rows); ++r)
        for (int64_t c = c0; c < std::min(c0 + kTile, cols); ++c)
          dst[c * rows + r] = src[r * cols + c];
}

const Param* find_local(Layer& l, const char* name) {
  for (Param* p : l.params())
    if (p->name == name)
      return p;
  return nullptr;
}

/// Best of a few runs (at least 3, until ~20 ms or 50 runs), in ms; one untimed warm-up first.
template <class F>
double best_ms(F&& run) {
  run();
  double best = 1e300, total = 0;
  for (int i = 0; i < 50 && (i < 3 || total < 20.0); ++i) {
    const auto t0 = Clock::now();
    run();
    const double ms = 1e3 * seconds_since(t0);
    best = std::min(best, ms);
    total += ms;
  }
  return best;
}

std::string density_str(double d) {
  std::ostringstream os;
  os.precision(3);
  os << d;
  return os.str();
}

}  // namespace

SparseExecutor::SparseExecutor(const Tensor& weight, const Tensor* bias)
    : m_weight(host_f32_copy(weight)), m_csr(CsrMatrix::from_dense(m_weight)) {
  if (bias)
    m_bias = host_f32_copy(*bias);
}

void SparseExecutor::set_isa(SpmmIsa isa) {
  LATHE_CHECK(spmm_isa_supported(isa), "sparse executor: this CPU does not support ", spmm_isa_name(isa));
  m_isa = isa;
  m_kernel.reset();
}

SparseMatmulKernel& SparseExecutor::kernel(Backend& be) {
  if (!m_kernel || m_kernel_be != &be) {
    m_kernel = be.make_sparse_matmul(m_csr, SparseMatmulOptions{true, m_isa});
    m_kernel_be = &be;
  }
  return *m_kernel;
}

void SparseExecutor::backward(LayerContext&, const std::vector<const Tensor*>&, const Tensor&, const Tensor&,
                              const std::vector<Tensor*>&) {
  LATHE_FAIL(describe(), " is an inference executor (the deployed form of a pruned layer); train the dense layer");
}

void SparseExecutor::forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) {
  const Tensor& x = *src[0];
  LATHE_CHECK(x.device().is_cpu() && x.dtype() == DType::f32 && dst.dtype() == DType::f32 && dst.is_dense(), describe(),
              ": needs dense f32 host tensors, got ", x.describe(), " -> ", dst.describe());
  if (m_mode == SparseKernelMode::always_sparse)
    return forward_sparse(ctx.backend, x, dst);
  if (m_mode == SparseKernelMode::always_dense)
    return forward_dense(ctx.backend, x, dst);
  const int64_t batch = x.dim(0);
  auto it = m_choices.find(batch);
  if (it == m_choices.end()) {
    KernelChoice c;
    c.dense_ms = best_ms([&] {
      forward_dense(ctx.backend, x, dst);
      ctx.backend.synchronize();
    });
    c.sparse_ms = best_ms([&] { forward_sparse(ctx.backend, x, dst); });
    c.sparse = c.sparse_ms < c.dense_ms;
    it = m_choices.emplace(batch, c).first;
  }
  if (it->second.sparse)
    forward_sparse(ctx.backend, x, dst);
  else
    forward_dense(ctx.backend, x, dst);
}

// ---- Linear ----

SparseLinear::SparseLinear(Linear& dense)
    : SparseExecutor(find_local(dense, "weight")->value,
                     find_local(dense, "bias") ? &find_local(dense, "bias")->value : nullptr),
      m_in(dense.in_features()),
      m_out(dense.out_features()) {}

std::string SparseLinear::describe() const {
  return "sparse_linear(" + std::to_string(m_in) + " -> " + std::to_string(m_out) + ", density " +
         density_str(density()) + ")";
}

Shape SparseLinear::output_shape(const std::vector<Shape>& inputs) const {
  const Shape& in = inputs.at(0);
  if (in.size() != 2 || in[1] != m_in)
    throw ConfigError(describe() + " expects input [N, " + std::to_string(m_in) + "], got " + shape_str(in));
  return {in[0], m_out};
}

void SparseLinear::forward_dense(Backend& be, const Tensor& src, Tensor& dst) {
  be.linear_forward(src, m_weight, m_bias.defined() ? &m_bias : nullptr, dst, m_relu ? PostOp::relu : PostOp::none);
}

void SparseLinear::forward_sparse(Backend& be, const Tensor& src, Tensor& dst) {
  SparseMatmulKernel& k = kernel(be);
  const Tensor x = src.is_contiguous() ? src : src.contiguous_copy();
  const int64_t n = x.dim(0);
  const float* xp = x.data<float>();
  float* yp = dst.data<float>();
  SpmmArgs a;
  a.bias = m_bias.defined() ? m_bias.data<float>() : nullptr;
  a.relu = m_relu;
  a.n = n;
  if (n == 1) {  // x^T and y^T are x and y themselves
    a.b = xp, a.ldb = 1, a.c = yp, a.ldc = 1;
    return k.run_rows(a);
  }
  m_xt.resize(m_in * n);
  m_yt.resize(m_out * n);
  transpose_tiled(xp, n, m_in, m_xt.data());
  a.b = m_xt.data(), a.ldb = n, a.c = m_yt.data(), a.ldc = n;
  k.run_rows(a);
  transpose_tiled(m_yt.data(), m_out, n, yp);
}

// ---- Conv2d ----

void im2col(const float* x, int64_t c, int64_t h, int64_t w, int64_t sc, int64_t sh, int64_t sw, int64_t k,
            const ConvParams& p, float* col) {
  const int64_t oh = conv_out_size(h, k, p.stride_h, p.pad_h), ow = conv_out_size(w, k, p.stride_w, p.pad_w);
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t kh = 0; kh < k; ++kh)
      for (int64_t kw = 0; kw < k; ++kw) {
        float* row = col + ((ci * k + kh) * k + kw) * oh * ow;
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t iy = y * p.stride_h - p.pad_h + kh;
          float* out = row + y * ow;
          if (iy < 0 || iy >= h) {
            std::fill(out, out + ow, 0.0f);
            continue;
          }
          const float* in = x + ci * sc + iy * sh;
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t ix = xo * p.stride_w - p.pad_w + kw;
            out[xo] = ix >= 0 && ix < w ? in[ix * sw] : 0.0f;
          }
        }
      }
}

SparseConv2d::SparseConv2d(Conv2d& dense)
    : SparseExecutor(find_local(dense, "weight")->value,
                     find_local(dense, "bias") ? &find_local(dense, "bias")->value : nullptr),
      m_in(dense.in_channels()),
      m_out(dense.out_channels()),
      m_kernel(dense.kernel()),
      m_p(dense.conv_params()) {}

std::string SparseConv2d::describe() const {
  return "sparse_conv2d(" + std::to_string(m_in) + " -> " + std::to_string(m_out) + ", k" + std::to_string(m_kernel) +
         " s" + std::to_string(m_p.stride_h) + " p" + std::to_string(m_p.pad_h) + ", density " +
         density_str(density()) + ")";
}

Shape SparseConv2d::output_shape(const std::vector<Shape>& inputs) const {
  const Shape& in = inputs.at(0);
  if (in.size() != 4 || in[1] != m_in)
    throw ConfigError(describe() + " expects input [N, " + std::to_string(m_in) + ", H, W], got " + shape_str(in));
  return {in[0], m_out, conv_out_size(in[2], m_kernel, m_p.stride_h, m_p.pad_h),
          conv_out_size(in[3], m_kernel, m_p.stride_w, m_p.pad_w)};
}

int64_t SparseConv2d::flops_per_sample(const std::vector<Shape>& inputs) const {
  const Shape out = output_shape(inputs);
  return 2 * m_csr.nnz() * out[2] * out[3];
}

void SparseConv2d::forward_dense(Backend& be, const Tensor& src, Tensor& dst) {
  be.conv2d_forward(m_p, src, m_weight, m_bias.defined() ? &m_bias : nullptr, dst,
                    m_relu ? PostOp::relu : PostOp::none);
}

void SparseConv2d::forward_sparse(Backend& be, const Tensor& src, Tensor& dst) {
  SparseMatmulKernel& k = kernel(be);
  const int64_t n = src.dim(0), h = src.dim(2), w = src.dim(3);
  const int64_t oh = dst.dim(2), ow = dst.dim(3), pixels = oh * ow, rows = m_in * m_kernel * m_kernel;
  const float* xp = src.data<float>();
  float* yp = dst.data<float>();
  const int threads = n > 1 ? std::min<int64_t>(omp_get_max_threads(), n) : 1;
  if (static_cast<int>(m_cols.size()) < threads)
    m_cols.resize(threads);
  for (auto& c : m_cols)
    c.resize(rows * pixels);
  const bool nchw = dst.is_contiguous();
  if (!nchw) {
    if (static_cast<int>(m_rows.size()) < threads)
      m_rows.resize(threads);
    for (auto& r : m_rows)
      r.resize(m_out * pixels);
  }
  const int64_t s0 = dst.stride(0), s1 = dst.stride(1), s2 = dst.stride(2), s3 = dst.stride(3);
  SpmmArgs base;
  base.bias = m_bias.defined() ? m_bias.data<float>() : nullptr;
  base.relu = m_relu;
  base.n = pixels, base.ldb = pixels, base.ldc = pixels;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t i = 0; i < n; ++i) {
    const int t = omp_get_thread_num();
    float* col = m_cols[t].data();
    im2col(xp + i * src.stride(0), m_in, h, w, src.stride(1), src.stride(2), src.stride(3), m_kernel, m_p, col);
    SpmmArgs a = base;
    a.b = col, a.c = nchw ? yp + i * m_out * pixels : m_rows[t].data();
    k.run_rows(a);
    if (!nchw) {  // [OC, pixels] rows -> the dst layout (channels-last: pixel-major)
      const float* r = m_rows[t].data();
      float* y = yp + i * s0;
      for (int64_t p = 0; p < pixels; ++p) {
        float* yp_p = y + (p / ow) * s2 + (p % ow) * s3;
        for (int64_t o = 0; o < m_out; ++o)
          yp_p[o * s1] = r[o * pixels + p];
      }
    }
  }
}

}  // namespace lathe
