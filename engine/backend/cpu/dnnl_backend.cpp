// oneDNN implementation of the heavy CPU ops, with a primitive cache keyed by shapes and strides.
// Weights stay in PyTorch's plain layouts ([O, K], [O, C, KH, KW]) in the tensors; where oneDNN's
// fastest kernel wants a blocked weight layout we reorder into a cached scratch buffer per call
// (weights are small next to activations).
#include "engine/backend/cpu/dnnl_backend.h"

#include "engine/backend/cpu/bf16_conv_c1.h"
#include "engine/backend/cpu/dnnl_util.h"
#include "engine/backend/cpu/maxpool_empty_windows.h"
#include "engine/backend/cpu/maxpool_kernels.h"
#include "engine/backend/cpu/round_kernels.h"

#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

namespace lathe {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

using dnnl_util::md_of;
using dnnl_util::relu_attr;
using dnnl_util::to_dnnl;

memory::desc md_with(const Shape& shape, const std::vector<int64_t>& strides, DType d) {
  return memory::desc(memory::dims(shape.begin(), shape.end()), to_dnnl(d),
                      memory::dims(strides.begin(), strides.end()));
}

void append_key(std::string& k, const Tensor& t) {
  k += dtype_name(t.dtype());
  for (int64_t d : t.shape())
    k += ',' + std::to_string(d);
  k += '/';
  for (int64_t s : t.strides())
    k += ',' + std::to_string(s);
  k += ';';
}

void append_key(std::string& k, int64_t v) { k += std::to_string(v) + ':'; }

bool dense_same(const Tensor& a, const Tensor& b) { return a.strides() == b.strides() && a.is_dense(); }

int64_t pad_right(int64_t in, int64_t out, int64_t k, int64_t s, int64_t pl) { return (out - 1) * s + k - in - pl; }

/// The strides (n, c, oh, ow) of max pooling's workspace: a byte per output element (the argmax's
/// kh * KW + kw), plain-laid-out as oneDNN 2.6 makes it for plain src/dst.
std::array<int64_t, 4> pool_workspace_strides(const memory::desc& ws, const Tensor& dst) {
  const dnnl_memory_desc_t& d = ws.data;
  const bool plain = d.data_type == dnnl_u8 && d.ndims == 4 && d.format_kind == dnnl_blocked &&
                     d.format_desc.blocking.inner_nblks == 0 && d.dims[0] == dst.dim(0) && d.dims[1] == dst.dim(1) &&
                     d.dims[2] == dst.dim(2) && d.dims[3] == dst.dim(3);
  LATHE_CHECK(plain, "max pooling: oneDNN's workspace for ", dst.describe(),
              " is not a plain byte per output element; the empty-window fix cannot read it");
  const auto& st = d.format_desc.blocking.strides;
  return {st[0], st[1], st[2], st[3]};
}

struct MatmulEntry {
  dnnl::matmul prim;
};

struct ConvEntry {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  memory weights_scratch;  // in fwd_pd.weights_desc() when it differs from the plain layout
  bool reorder_weights = false;
  dnnl::reorder weights_reorder;
};

struct ConvBwdDataEntry {
  dnnl::convolution_backward_data prim;
  memory weights_scratch;
  bool reorder_weights = false;
  dnnl::reorder weights_reorder;
};

struct ConvBwdWeightsEntry {
  dnnl::convolution_backward_weights prim;
  memory diff_weights_scratch;
  bool reorder_weights = false;
  dnnl::reorder weights_reorder;  // scratch -> plain
};

struct PoolEntry {
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
  std::array<int64_t, 4> ws_strides{};  // the workspace's byte per output (pool_workspace_strides)
};

}  // namespace

struct DnnlBackend::Impl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::unordered_map<std::string, MatmulEntry> matmuls;
  std::unordered_map<std::string, ConvEntry> convs;
  std::unordered_map<std::string, ConvBwdDataEntry> conv_bwd_data;
  std::unordered_map<std::string, ConvBwdWeightsEntry> conv_bwd_weights;
  std::unordered_map<std::string, PoolEntry> pools;
  std::unordered_map<std::string, dnnl::reorder> reorders;
  std::unordered_map<std::string, dnnl::eltwise_forward> eltwise_fwd;
  std::unordered_map<std::string, dnnl::eltwise_backward> eltwise_bwd;
  size_t created = 0;
  bool native_bf16 = false;  // oneDNN runs bf16 matmul/conv on bf16 instructions here (see probe_native_bf16)
  bool own_kernels = true;   // Lathe's pooling and first-conv kernels where they apply (set_own_kernels)

  memory mem(const Tensor& t) { return memory(md_of(t), eng, t.raw()); }

  /// dst[M, N] = a[M, K] * b[K, N] (+ bias[1, N]) with optional ReLU; any strides.
  void matmul(const memory::desc& a, void* pa, const memory::desc& b, void* pb, const memory::desc* bias, void* pbias,
              const memory::desc& c, void* pc, PostOp post, const std::string& key) {
    auto it = matmuls.find(key);
    if (it == matmuls.end()) {
      dnnl::matmul::desc d = bias ? dnnl::matmul::desc(a, b, *bias, c) : dnnl::matmul::desc(a, b, c);
      dnnl::matmul::primitive_desc pd(d, relu_attr(post), eng);
      it = matmuls.emplace(key, MatmulEntry{dnnl::matmul(pd)}).first;
      ++created;
    }
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(a, eng, pa)}, {DNNL_ARG_WEIGHTS, memory(b, eng, pb)}, {DNNL_ARG_DST, memory(c, eng, pc)}};
    if (bias)
      args.emplace(DNNL_ARG_BIAS, memory(*bias, eng, pbias));
    it->second.prim.execute(strm, args);
    strm.wait();
  }

  ConvEntry& conv_entry(const ConvParams& p, const Tensor& src, const Tensor& weights, bool has_bias, const Tensor& dst,
                        PostOp post) {
    std::string key = "conv";
    append_key(key, src);
    append_key(key, weights);
    append_key(key, dst);
    for (int64_t v :
         {p.stride_h, p.stride_w, p.pad_h, p.pad_w, static_cast<int64_t>(has_bias), static_cast<int64_t>(post)})
      append_key(key, v);
    auto it = convs.find(key);
    if (it != convs.end())
      return it->second;

    const memory::dims strides{p.stride_h, p.stride_w}, pl{p.pad_h, p.pad_w};
    const memory::dims pr{pad_right(src.dim(2), dst.dim(2), weights.dim(2), p.stride_h, p.pad_h),
                          pad_right(src.dim(3), dst.dim(3), weights.dim(3), p.stride_w, p.pad_w)};
    memory::desc w_any(memory::dims(weights.shape().begin(), weights.shape().end()), to_dnnl(weights.dtype()),
                       tag::any);
    memory::desc b_md({weights.dim(0)}, dt::f32, tag::a);
    auto d =
        has_bias
            ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                              md_of(src), w_any, b_md, md_of(dst), strides, pl, pr)
            : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                              md_of(src), w_any, md_of(dst), strides, pl, pr);
    ConvEntry e;
    e.fwd_pd = dnnl::convolution_forward::primitive_desc(d, relu_attr(post), eng);
    e.fwd = dnnl::convolution_forward(e.fwd_pd);
    const memory::desc plain = md_of(weights);
    if (e.fwd_pd.weights_desc() != plain) {
      e.reorder_weights = true;
      e.weights_scratch = memory(e.fwd_pd.weights_desc(), eng);
      e.weights_reorder = dnnl::reorder(memory(plain, eng, nullptr), e.weights_scratch);
    }
    ++created;
    return convs.emplace(key, std::move(e)).first->second;
  }
};

namespace {
/// True when this CPU has bf16 instructions (AVX512_BF16 or AMX) and oneDNN 2.6 builds bf16 matmul
/// and channels-last convolutions (all three passes) with f32 outputs on them. Elsewhere oneDNN
/// either refuses bf16 (AVX2) or emulates it slower than f32 (plain AVX-512), so we emulate instead.
bool probe_native_bf16(const dnnl::engine& eng) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  if ((isa & need) != need)
    return false;
  try {
    const memory::desc a({4, 32}, dt::bf16, tag::ab), b({32, 16}, dt::bf16, tag::ba), c({4, 16}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc mm(dnnl::matmul::desc(a, b, c), eng);
    const memory::desc src({2, 16, 8, 8}, dt::bf16, tag::acdb), dst({2, 16, 8, 8}, dt::bf16, tag::acdb);
    const memory::desc src32({2, 16, 8, 8}, dt::f32, tag::acdb);
    const memory::desc w({16, 16, 3, 3}, dt::bf16, tag::any), w32({16, 16, 3, 3}, dt::f32, tag::any);
    const memory::desc bias({16}, dt::f32, tag::a);
    const memory::dims s{1, 1}, pad{1, 1};
    dnnl::convolution_forward::primitive_desc fwd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src, w,
                                        bias, dst, s, pad, pad),
        eng);
    dnnl::convolution_backward_data::primitive_desc bwd_d(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src32, w, dst, s, pad, pad), eng,
        fwd);
    dnnl::convolution_backward_weights::primitive_desc bwd_w(
        dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src, w32, bias, dst, s, pad, pad),
        eng, fwd);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool is_bf16(const Tensor& t) { return t.dtype() == DType::bf16; }
bool is_f32(const Tensor& t) { return t.dtype() == DType::f32; }
/// A matmul/conv result (dst, diff_src) of bf16 operands: f32, or bf16 for bf16 activations.
bool is_f32_or_bf16(const Tensor& t) { return is_f32(t) || is_bf16(t); }
}  // namespace

DnnlBackend::DnnlBackend() : m_impl(std::make_unique<Impl>()) { m_impl->native_bf16 = probe_native_bf16(m_impl->eng); }
DnnlBackend::~DnnlBackend() = default;

bool DnnlBackend::supports(Op op, DType dtype) const {
  // relu and max pooling at bf16 serve mixed-precision training's bf16 activations (Model).
  if (dtype == DType::bf16 &&
      (op == Op::linear || op == Op::conv2d || op == Op::reorder || op == Op::relu || op == Op::maxpool2d))
    return m_impl->native_bf16;
  // s8/u8: oneDNN int8 linear/conv2d (dnnl_int8.cpp), the reference's integer pooling, ReLU and
  // (de)quantization loops; f32 sparse_matmul: the AVX2/AVX-512 CSR kernels (cpu_sparse.cpp).
  if (dtype == DType::s8 || dtype == DType::u8 || op == Op::sparse_matmul)
    return ReferenceBackend::supports(op, dtype);
  return dtype == DType::f32;
}

bool DnnlBackend::writes_matmul_results_in(DType dtype) const {
  return dtype == DType::f32 || (dtype == DType::bf16 && m_impl->native_bf16);
}

void DnnlBackend::round_to_precision(const Tensor& src, Tensor& dst, DType precision) {
  if (!is_f32(src) || !is_f32(dst) || !dense_same(src, dst) || src.shape() != dst.shape() ||
      (precision != DType::bf16 && precision != DType::f16))
    return ReferenceBackend::round_to_precision(src, dst, precision);  // checks and explains the bad call
  const float* x = static_cast<const float*>(src.raw());
  float* y = static_cast<float*>(dst.raw());
  if (precision == DType::bf16)
    cpu::round_to_bf16(x, y, src.numel());
  else
    cpu::round_to_f16(x, y, src.numel());
}

size_t DnnlBackend::primitives_created() const { return m_impl->created; }
void DnnlBackend::set_own_kernels(bool on) { m_impl->own_kernels = on; }
bool DnnlBackend::own_kernels() const { return m_impl->own_kernels; }

void DnnlBackend::reorder_impl(const Tensor& src, Tensor& dst) {
  if (src.dtype() == DType::f64 || dst.dtype() == DType::f64)
    return ReferenceBackend::reorder_impl(src, dst);
  std::string key = "reorder";
  append_key(key, src);
  append_key(key, dst);
  auto it = m_impl->reorders.find(key);
  memory ms = m_impl->mem(src), md = m_impl->mem(dst);
  if (it == m_impl->reorders.end()) {
    it = m_impl->reorders.emplace(key, dnnl::reorder(ms, md)).first;
    ++m_impl->created;
  }
  it->second.execute(m_impl->strm, ms, md);
  m_impl->strm.wait();
}

// ---------------------------------------------------------------- linear (matmul primitive)
void DnnlBackend::linear_forward_impl(const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                                      PostOp post) {
  const bool bf16 = m_impl->native_bf16 && is_bf16(src) && is_bf16(weights) && is_f32_or_bf16(dst);
  if (!bf16 && !(is_f32(src) && is_f32(weights)))
    return ReferenceBackend::linear_forward_impl(src, weights, bias, dst, post);
  const int64_t K = src.dim(1), O = weights.dim(0);
  // weights [O, K] read as its transpose [K, O] through strides.
  const memory::desc a = md_of(src), b = md_with({K, O}, {weights.stride(1), weights.stride(0)}, weights.dtype());
  const memory::desc c = md_of(dst);
  std::string key = "lin_f";
  append_key(key, src);
  append_key(key, weights);
  append_key(key, dst);
  append_key(key, bias != nullptr);
  append_key(key, static_cast<int64_t>(post));
  if (bias) {
    const memory::desc bm = md_with({1, O}, {0, bias->stride(0)}, DType::f32);
    m_impl->matmul(a, src.raw(), b, weights.raw(), &bm, bias->raw(), c, dst.raw(), post, key);
  } else {
    m_impl->matmul(a, src.raw(), b, weights.raw(), nullptr, nullptr, c, dst.raw(), post, key);
  }
}

void DnnlBackend::linear_backward_data_impl(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) {
  const bool bf16 = m_impl->native_bf16 && is_bf16(diff_dst) && is_bf16(weights) && is_f32_or_bf16(diff_src);
  if (!bf16 && !(is_f32(diff_dst) && is_f32(weights)))
    return ReferenceBackend::linear_backward_data_impl(diff_dst, weights, diff_src);
  std::string key = "lin_bd";
  append_key(key, diff_dst);
  append_key(key, weights);
  append_key(key, diff_src);
  m_impl->matmul(md_of(diff_dst), diff_dst.raw(), md_of(weights), weights.raw(), nullptr, nullptr, md_of(diff_src),
                 diff_src.raw(), PostOp::none, key);
}

void DnnlBackend::linear_backward_weights_impl(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                                               Tensor* diff_bias) {
  const bool bf16 = m_impl->native_bf16 && is_bf16(src) && is_bf16(diff_dst) && is_f32(diff_weights);
  if (!bf16 && !(is_f32(src) && is_f32(diff_dst)))
    return ReferenceBackend::linear_backward_weights_impl(src, diff_dst, diff_weights, diff_bias);
  const int64_t N = src.dim(0), O = diff_dst.dim(1);
  // diff_weights [O, K] = diff_dst^T [O, N] * src [N, K]
  const memory::desc a = md_with({O, N}, {diff_dst.stride(1), diff_dst.stride(0)}, diff_dst.dtype());
  std::string key = "lin_bw";
  append_key(key, src);
  append_key(key, diff_dst);
  append_key(key, diff_weights);
  m_impl->matmul(a, diff_dst.raw(), md_of(src), src.raw(), nullptr, nullptr, md_of(diff_weights), diff_weights.raw(),
                 PostOp::none, key);
  if (diff_bias) {
    LATHE_CHECK(diff_dst.is_contiguous() && diff_bias->is_contiguous(), "linear bias grad needs contiguous tensors");
    float* db = diff_bias->data<float>();
    std::memset(db, 0, sizeof(float) * O);
    if (bf16) {  // f32 sums of the bf16 gradient
      const uint16_t* dy = static_cast<const uint16_t*>(diff_dst.raw());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o)
          db[o] += bf16_to_f32(dy[n * O + o]);
    } else {
      const float* dy = diff_dst.data<float>();
      for (int64_t n = 0; n < N; ++n) {
        const float* row = dy + n * O;
#pragma omp simd
        for (int64_t o = 0; o < O; ++o)
          db[o] += row[o];
      }
    }
  }
}

// ---------------------------------------------------------------- conv2d
namespace {
/// A conv's image side (src, diff_src) in NCHW with C > 1 beside a channels-last output: a
/// network's first conv on colour data (the loader hands out NCHW batches). oneDNN 2.6 has no JIT
/// convolution for that mix of layouts and runs its reference loop (over 50x slower on the
/// 3x32x32 ResNet-style stem), so that tensor goes through a channels-last copy instead.
bool plain_beside_channels_last(const Tensor& image, const Tensor& out) {
  return image.ndim() == 4 && image.dim(1) > 1 && image.format() == MemoryFormat::contiguous &&
         out.format() == MemoryFormat::channels_last;
}

Tensor channels_last_like(const Tensor& t) {
  return Tensor::empty(t.shape(), t.dtype(), Device::cpu(), MemoryFormat::channels_last);
}
}  // namespace

void DnnlBackend::conv2d_forward_impl(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                                      Tensor& dst, PostOp post) {
  const bool bf16 = m_impl->native_bf16 && is_bf16(src) && is_bf16(weights) && is_f32_or_bf16(dst);
  if (!bf16 && !(is_f32(src) && is_f32(weights)))
    return ReferenceBackend::conv2d_forward_impl(p, src, weights, bias, dst, post);
  if (bf16 && m_impl->own_kernels && (!bias || is_f32(*bias)) && cpu::bf16_conv_c1_applies(p, src, weights, dst))
    return cpu::bf16_conv_c1_forward(p, src, weights, bias, dst, post);
  if (plain_beside_channels_last(src, dst)) {
    Tensor src_cl = channels_last_like(src);
    reorder_impl(src, src_cl);
    return conv2d_forward_impl(p, src_cl, weights, bias, dst, post);
  }
  ConvEntry& e = m_impl->conv_entry(p, src, weights, bias != nullptr, dst, post);
  memory w_user = m_impl->mem(weights);
  memory w = w_user;
  if (e.reorder_weights) {
    e.weights_reorder.execute(m_impl->strm, w_user, e.weights_scratch);
    w = e.weights_scratch;
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, m_impl->mem(src)}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, m_impl->mem(dst)}};
  if (bias)
    args.emplace(DNNL_ARG_BIAS, memory(memory::desc({weights.dim(0)}, dt::f32, tag::a), m_impl->eng, bias->raw()));
  e.fwd.execute(m_impl->strm, args);
  m_impl->strm.wait();
}

void DnnlBackend::conv2d_backward_data_impl(const ConvParams& p, const Tensor& diff_dst, const Tensor& weights,
                                            Tensor& diff_src) {
  const bool bf16 = m_impl->native_bf16 && is_bf16(diff_dst) && is_bf16(weights) && is_f32_or_bf16(diff_src);
  if (!bf16 && !(is_f32(diff_dst) && is_f32(weights)))
    return ReferenceBackend::conv2d_backward_data_impl(p, diff_dst, weights, diff_src);
  if (plain_beside_channels_last(diff_src, diff_dst)) {
    Tensor dx = channels_last_like(diff_src);
    conv2d_backward_data_impl(p, diff_dst, weights, dx);
    reorder_impl(dx, diff_src);
    return;
  }
  std::string key = "conv_bd";
  append_key(key, diff_dst);
  append_key(key, weights);
  append_key(key, diff_src);
  for (int64_t v : {p.stride_h, p.stride_w, p.pad_h, p.pad_w})
    append_key(key, v);
  auto& cache = m_impl->conv_bwd_data;
  auto it = cache.find(key);
  if (it == cache.end()) {
    // The backward primitive needs the forward one as a hint; build it for the matching layouts.
    Tensor fake_dst_layout = diff_dst;  // same shape/strides as dst
    // A bf16 hint takes a bf16 src (a forward primitive with f32 src and bf16 weights does not exist).
    const Tensor hint_src =
        bf16 ? Tensor::empty(diff_src.shape(), DType::bf16, Device::cpu(), diff_src.format()) : diff_src;
    ConvEntry& fwd = m_impl->conv_entry(p, hint_src, weights, false, fake_dst_layout, PostOp::none);
    const memory::dims strides{p.stride_h, p.stride_w}, pl{p.pad_h, p.pad_w};
    const memory::dims pr{pad_right(diff_src.dim(2), diff_dst.dim(2), weights.dim(2), p.stride_h, p.pad_h),
                          pad_right(diff_src.dim(3), diff_dst.dim(3), weights.dim(3), p.stride_w, p.pad_w)};
    memory::desc w_any(memory::dims(weights.shape().begin(), weights.shape().end()), to_dnnl(weights.dtype()),
                       tag::any);
    dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, md_of(diff_src), w_any,
                                            md_of(diff_dst), strides, pl, pr);
    dnnl::convolution_backward_data::primitive_desc pd(d, m_impl->eng, fwd.fwd_pd);
    ConvBwdDataEntry e;
    e.prim = dnnl::convolution_backward_data(pd);
    const memory::desc plain = md_of(weights);
    if (pd.weights_desc() != plain) {
      e.reorder_weights = true;
      e.weights_scratch = memory(pd.weights_desc(), m_impl->eng);
      e.weights_reorder = dnnl::reorder(memory(plain, m_impl->eng, nullptr), e.weights_scratch);
    }
    ++m_impl->created;
    it = cache.emplace(key, std::move(e)).first;
  }
  ConvBwdDataEntry& e = it->second;
  memory w = m_impl->mem(weights);
  if (e.reorder_weights) {
    e.weights_reorder.execute(m_impl->strm, w, e.weights_scratch);
    w = e.weights_scratch;
  }
  e.prim.execute(
      m_impl->strm,
      {{DNNL_ARG_DIFF_DST, m_impl->mem(diff_dst)}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, m_impl->mem(diff_src)}});
  m_impl->strm.wait();
}

void DnnlBackend::conv2d_backward_weights_impl(const ConvParams& p, const Tensor& src, const Tensor& diff_dst,
                                               Tensor& diff_weights, Tensor* diff_bias) {
  const bool bf16 = m_impl->native_bf16 && is_bf16(src) && is_bf16(diff_dst) && is_f32(diff_weights);
  if (!bf16 && !(is_f32(src) && is_f32(diff_dst)))
    return ReferenceBackend::conv2d_backward_weights_impl(p, src, diff_dst, diff_weights, diff_bias);
  if (bf16 && m_impl->own_kernels && (!diff_bias || is_f32(*diff_bias)) &&
      cpu::bf16_conv_c1_applies(p, src, diff_weights, diff_dst))
    return cpu::bf16_conv_c1_backward_weights(p, src, diff_dst, diff_weights, diff_bias);
  if (plain_beside_channels_last(src, diff_dst)) {
    Tensor src_cl = channels_last_like(src);
    reorder_impl(src, src_cl);
    return conv2d_backward_weights_impl(p, src_cl, diff_dst, diff_weights, diff_bias);
  }
  std::string key = "conv_bw";
  append_key(key, src);
  append_key(key, diff_dst);
  append_key(key, diff_weights);
  append_key(key, diff_bias != nullptr);
  for (int64_t v : {p.stride_h, p.stride_w, p.pad_h, p.pad_w})
    append_key(key, v);
  auto& cache = m_impl->conv_bwd_weights;
  auto it = cache.find(key);
  if (it == cache.end()) {
    Tensor dst_layout = diff_dst;
    // A bf16 hint takes bf16 weights (the gradient itself is written in f32).
    const Tensor hint_w = bf16 ? Tensor::empty(diff_weights.shape(), DType::bf16) : diff_weights;
    ConvEntry& fwd = m_impl->conv_entry(p, src, hint_w, diff_bias != nullptr, dst_layout, PostOp::none);
    const memory::dims strides{p.stride_h, p.stride_w}, pl{p.pad_h, p.pad_w};
    const memory::dims pr{pad_right(src.dim(2), diff_dst.dim(2), diff_weights.dim(2), p.stride_h, p.pad_h),
                          pad_right(src.dim(3), diff_dst.dim(3), diff_weights.dim(3), p.stride_w, p.pad_w)};
    memory::desc w_any(memory::dims(diff_weights.shape().begin(), diff_weights.shape().end()), dt::f32, tag::any);
    memory::desc b_md({diff_weights.dim(0)}, dt::f32, tag::a);
    auto d = diff_bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, md_of(src),
                                                                  w_any, b_md, md_of(diff_dst), strides, pl, pr)
                       : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, md_of(src),
                                                                  w_any, md_of(diff_dst), strides, pl, pr);
    dnnl::convolution_backward_weights::primitive_desc pd(d, m_impl->eng, fwd.fwd_pd);
    ConvBwdWeightsEntry e;
    e.prim = dnnl::convolution_backward_weights(pd);
    const memory::desc plain = md_of(diff_weights);
    if (pd.diff_weights_desc() != plain) {
      e.reorder_weights = true;
      e.diff_weights_scratch = memory(pd.diff_weights_desc(), m_impl->eng);
      e.weights_reorder = dnnl::reorder(e.diff_weights_scratch, memory(plain, m_impl->eng, nullptr));
    }
    ++m_impl->created;
    it = cache.emplace(key, std::move(e)).first;
  }
  ConvBwdWeightsEntry& e = it->second;
  memory dw_user = m_impl->mem(diff_weights);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, m_impl->mem(src)},
                                       {DNNL_ARG_DIFF_DST, m_impl->mem(diff_dst)},
                                       {DNNL_ARG_DIFF_WEIGHTS, e.reorder_weights ? e.diff_weights_scratch : dw_user}};
  if (diff_bias)
    args.emplace(DNNL_ARG_DIFF_BIAS,
                 memory(memory::desc({diff_weights.dim(0)}, dt::f32, tag::a), m_impl->eng, diff_bias->raw()));
  e.prim.execute(m_impl->strm, args);
  if (e.reorder_weights)
    e.weights_reorder.execute(m_impl->strm, e.diff_weights_scratch, dw_user);
  m_impl->strm.wait();
}

// ---------------------------------------------------------------- max pooling
namespace {
/// f32 always; bf16 where oneDNN runs it natively (the bf16 activations of mixed precision).
bool native_float(const Tensor& t, bool native_bf16) { return is_f32(t) || (native_bf16 && is_bf16(t)); }
}  // namespace

void DnnlBackend::maxpool2d_forward_impl(const PoolParams& p, const Tensor& src, Tensor& dst, Tensor& workspace) {
  if (!native_float(src, m_impl->native_bf16) || dst.dtype() != src.dtype())
    return ReferenceBackend::maxpool2d_forward_impl(p, src, dst, workspace);
  if (m_impl->own_kernels && cpu::maxpool_nhwc_applies(p, src, dst))  // workspace: a byte per output element
    return cpu::maxpool_nhwc_forward(p, src, dst, workspace);
  std::string key = "pool";
  append_key(key, src);
  append_key(key, dst);
  for (int64_t v : {p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w})
    append_key(key, v);
  auto it = m_impl->pools.find(key);
  if (it == m_impl->pools.end()) {
    const memory::dims strides{p.stride_h, p.stride_w}, kernel{p.kernel_h, p.kernel_w}, pl{p.pad_h, p.pad_w};
    const memory::dims pr{pad_right(src.dim(2), dst.dim(2), p.kernel_h, p.stride_h, p.pad_h),
                          pad_right(src.dim(3), dst.dim(3), p.kernel_w, p.stride_w, p.pad_w)};
    dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::pooling_max, md_of(src),
                                  md_of(dst), strides, kernel, pl, pr);
    PoolEntry e;
    e.fwd_pd = dnnl::pooling_forward::primitive_desc(d, m_impl->eng);
    e.fwd = dnnl::pooling_forward(e.fwd_pd);
    dnnl::pooling_backward::desc bd(dnnl::algorithm::pooling_max, md_of(src), md_of(dst), strides, kernel, pl, pr);
    e.bwd = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(bd, m_impl->eng, e.fwd_pd));
    e.ws_strides = pool_workspace_strides(e.fwd_pd.workspace_desc(), dst);
    m_impl->created += 2;
    it = m_impl->pools.emplace(key, std::move(e)).first;
  }
  PoolEntry& e = it->second;
  const int64_t ws_bytes = static_cast<int64_t>(e.fwd_pd.workspace_desc().get_size());
  if (!workspace.defined() || workspace.dtype() != DType::u8 || workspace.numel() != ws_bytes)
    workspace = Tensor::empty({ws_bytes}, DType::u8);
  e.fwd.execute(m_impl->strm, {{DNNL_ARG_SRC, m_impl->mem(src)},
                               {DNNL_ARG_DST, m_impl->mem(dst)},
                               {DNNL_ARG_WORKSPACE, memory(e.fwd_pd.workspace_desc(), m_impl->eng, workspace.raw())}});
  m_impl->strm.wait();
  // oneDNN leaves a window with no tap above -FLT_MAX (all -inf or NaN) at -FLT_MAX; the reference
  // gives its first tap (maxpool_empty_windows.h).
  cpu::fix_empty_max_windows(p, src, dst, static_cast<uint8_t*>(workspace.raw()), e.ws_strides);
}

void DnnlBackend::maxpool2d_backward_impl(const PoolParams& p, const Tensor& diff_dst, const Tensor& workspace,
                                          Tensor& diff_src) {
  if (!native_float(diff_dst, m_impl->native_bf16) || diff_src.dtype() != diff_dst.dtype())
    return ReferenceBackend::maxpool2d_backward_impl(p, diff_dst, workspace, diff_src);
  // The workspace says which forward ran (own_kernels may have changed since).
  if (cpu::maxpool_nhwc_applies(p, diff_src, diff_dst) && cpu::is_maxpool_nhwc_index(workspace, diff_dst))
    return cpu::maxpool_nhwc_backward(p, diff_dst, workspace, diff_src);
  std::string key = "pool";
  append_key(key, diff_src);
  append_key(key, diff_dst);
  for (int64_t v : {p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w})
    append_key(key, v);
  auto it = m_impl->pools.find(key);
  LATHE_CHECK(it != m_impl->pools.end() && workspace.dtype() == DType::u8,
              "maxpool2d_backward without a matching maxpool2d_forward on this backend (layouts must match)");
  PoolEntry& e = it->second;
  e.bwd.execute(m_impl->strm, {{DNNL_ARG_DIFF_DST, m_impl->mem(diff_dst)},
                               {DNNL_ARG_DIFF_SRC, m_impl->mem(diff_src)},
                               {DNNL_ARG_WORKSPACE, memory(e.fwd_pd.workspace_desc(), m_impl->eng, workspace.raw())}});
  m_impl->strm.wait();
}

// ---------------------------------------------------------------- elementwise (ReLU: f32 or native bf16; the rest f32)
void DnnlBackend::relu_forward_impl(const Tensor& src, Tensor& dst) {
  if (!native_float(src, m_impl->native_bf16) || dst.dtype() != src.dtype() || src.strides() != dst.strides())
    return ReferenceBackend::relu_forward_impl(src, dst);
  std::string key = "relu_f";
  append_key(key, src);
  auto it = m_impl->eltwise_fwd.find(key);
  if (it == m_impl->eltwise_fwd.end()) {
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu, md_of(src), 0.f,
                                  0.f);
    it = m_impl->eltwise_fwd.emplace(key, dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, m_impl->eng)))
             .first;
    ++m_impl->created;
  }
  it->second.execute(m_impl->strm, {{DNNL_ARG_SRC, m_impl->mem(src)}, {DNNL_ARG_DST, m_impl->mem(dst)}});
  m_impl->strm.wait();
}

void DnnlBackend::relu_backward_impl(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) {
  if (!native_float(dst, m_impl->native_bf16) || diff_dst.dtype() != dst.dtype() || diff_src.dtype() != dst.dtype() ||
      dst.strides() != diff_dst.strides() || dst.strides() != diff_src.strides())
    return ReferenceBackend::relu_backward_impl(dst, diff_dst, diff_src);
  std::string key = "relu_b";
  append_key(key, dst);
  auto it = m_impl->eltwise_bwd.find(key);
  if (it == m_impl->eltwise_bwd.end()) {
    // The *_use_dst_for_bwd variant takes the forward output, which is what the Model keeps.
    const memory::desc md = md_of(dst);
    dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu_use_dst_for_bwd, md,
                                   0.f, 0.f);
    dnnl::eltwise_forward::primitive_desc fpd(fd, m_impl->eng);
    dnnl::eltwise_backward::desc bd(dnnl::algorithm::eltwise_relu_use_dst_for_bwd, md, md, 0.f, 0.f);
    it = m_impl->eltwise_bwd
             .emplace(key, dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(bd, m_impl->eng, fpd)))
             .first;
    ++m_impl->created;
  }
  it->second.execute(m_impl->strm, {{DNNL_ARG_DST, m_impl->mem(dst)},
                                    {DNNL_ARG_DIFF_DST, m_impl->mem(diff_dst)},
                                    {DNNL_ARG_DIFF_SRC, m_impl->mem(diff_src)}});
  m_impl->strm.wait();
}

void DnnlBackend::add_impl(const Tensor& a, const Tensor& b, Tensor& dst) {
  if (a.dtype() != DType::f32 || !dense_same(a, b) || !dense_same(a, dst))
    return ReferenceBackend::add_impl(a, b, dst);
  const float* x = static_cast<const float*>(a.raw());
  const float* y = static_cast<const float*>(b.raw());
  float* z = static_cast<float*>(dst.raw());
  const int64_t n = a.numel();
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i)
    z[i] = x[i] + y[i];
}

void DnnlBackend::axpy_impl(double alpha, const Tensor& src, Tensor& dst) {
  if (src.dtype() != DType::f32 || !dense_same(src, dst))
    return ReferenceBackend::axpy_impl(alpha, src, dst);
  const float* x = static_cast<const float*>(src.raw());
  float* y = static_cast<float*>(dst.raw());
  const float a = static_cast<float>(alpha);
  const int64_t n = src.numel();
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i)
    y[i] += a * x[i];
}

void DnnlBackend::scale_impl(Tensor& t, double alpha) {
  if (t.dtype() != DType::f32 || !t.is_dense())
    return ReferenceBackend::scale_impl(t, alpha);
  float* x = static_cast<float*>(t.raw());
  const float a = static_cast<float>(alpha);
  const int64_t n = t.numel();
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i)
    x[i] *= a;
}

LossResult DnnlBackend::softmax_cross_entropy_impl(const Tensor& logits, const Tensor& labels, Tensor* diff_logits,
                                                   double grad_scale) {
  if (logits.dtype() != DType::f32 || !logits.is_contiguous() || (diff_logits && !diff_logits->is_contiguous()))
    return ReferenceBackend::softmax_cross_entropy_impl(logits, labels, diff_logits, grad_scale);
  const int64_t N = logits.dim(0), C = logits.dim(1);
  const float* z = logits.data<float>();
  const int32_t* y = labels.data<int32_t>();
  float* g = diff_logits ? diff_logits->data<float>() : nullptr;
  LossResult r;
  const float gs = static_cast<float>(grad_scale);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = z + n * C;
    LATHE_CHECK(y[n] >= 0 && y[n] < C, "label ", y[n], " out of range [0, ", C, ")");
    float mx = row[0];
    int64_t arg = 0;
    for (int64_t c = 1; c < C; ++c)
      if (row[c] > mx) {
        mx = row[c];
        arg = c;
      }
    float se = 0;
    for (int64_t c = 0; c < C; ++c)
      se += std::exp(row[c] - mx);
    const float lse = mx + std::log(se);
    r.loss_sum += static_cast<double>(lse - row[y[n]]);
    r.correct += arg == y[n];
    if (g) {
      float* grow = g + n * C;
      for (int64_t c = 0; c < C; ++c)
        grow[c] = gs * (std::exp(row[c] - lse) - (c == y[n] ? 1.f : 0.f));
    }
  }
  return r;
}

void DnnlBackend::sgd_update_impl(const SgdParams& p, Tensor& param, const Tensor& grad, Tensor& momentum_buf) {
  if (param.dtype() != DType::f32)
    return ReferenceBackend::sgd_update_impl(p, param, grad, momentum_buf);
  float* w = param.data<float>();
  const float* g = grad.data<float>();
  const int64_t n = param.numel();
  const float lr = static_cast<float>(p.lr), mu = static_cast<float>(p.momentum),
              wd = static_cast<float>(p.weight_decay);
  if (p.momentum == 0) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      w[i] -= lr * (g[i] + wd * w[i]);
    return;
  }
  float* buf = momentum_buf.data<float>();
  // Two loops, not one with `nesterov ? ... : ...` inside: gcc 12 unswitches that loop on the flag
  // and vectorizes only one of the two copies, which left plain momentum (the default) scalar.
  if (p.nesterov) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + wd * w[i];
      buf[i] = mu * buf[i] + d;
      w[i] -= lr * (d + mu * buf[i]);
    }
    return;
  }
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    buf[i] = mu * buf[i] + (g[i] + wd * w[i]);
    w[i] -= lr * buf[i];
  }
}

void DnnlBackend::adamw_update_impl(const AdamWParams& p, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) {
  if (param.dtype() != DType::f32)
    return ReferenceBackend::adamw_update_impl(p, param, grad, m, v);
  float* w = param.data<float>();
  const float* g = grad.data<float>();
  float* mm = m.data<float>();
  float* vv = v.data<float>();
  const int64_t n = param.numel();
  const float b1 = static_cast<float>(p.beta1), b2 = static_cast<float>(p.beta2);
  const float bc1 = static_cast<float>(1.0 - std::pow(p.beta1, static_cast<double>(p.step)));
  const float bc2 = static_cast<float>(1.0 - std::pow(p.beta2, static_cast<double>(p.step)));
  const float lr = static_cast<float>(p.lr), decay = static_cast<float>(1.0 - p.lr * p.weight_decay);
  const float eps = static_cast<float>(p.eps);
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    w[i] *= decay;
    mm[i] = b1 * mm[i] + (1 - b1) * g[i];
    vv[i] = b2 * vv[i] + (1 - b2) * g[i] * g[i];
    w[i] -= lr * (mm[i] / bc1) / (std::sqrt(vv[i] / bc2) + eps);
  }
}

double DnnlBackend::sum_impl(const Tensor& t) {
  if (t.dtype() != DType::f32 || !t.is_dense())
    return ReferenceBackend::sum_impl(t);
  const float* x = static_cast<const float*>(t.raw());
  double s = 0;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    s += x[i];
  return s;
}

double DnnlBackend::sum_squares_impl(const Tensor& t) {
  if (t.dtype() != DType::f32 || !t.is_dense())
    return ReferenceBackend::sum_squares_impl(t);
  const float* x = static_cast<const float*>(t.raw());
  double s = 0;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    s += static_cast<double>(x[i]) * x[i];
  return s;
}

}  // namespace lathe
