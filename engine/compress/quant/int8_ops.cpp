// oneDNN int8 matmul and convolution for Int8Linear and Int8Conv2d, cached per input shape.
#include "engine/compress/quant/int8_ops.h"

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "engine/backend/cpu/dnnl_util.h"
#include "engine/compress/quant/int8_reference.h"

namespace lathe {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

using dnnl_util::to_dnnl;

int32_t dst_zero_point(const Int8LayerData& L) { return L.config.dst ? L.config.dst->zero_point[0] : 0; }

dnnl::primitive_attr make_attr(const Int8LayerData& L, const std::vector<float>& output_scales) {
  dnnl::primitive_attr attr;
  attr.set_output_scales(1 << 1, output_scales);  // dim 1 of dst is the output channel
  if (L.config.src.zero_point[0] != 0)
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (dst_zero_point(L) != 0)
    attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  if (L.config.post == PostOp::relu) {
    dnnl::post_ops po;
    dnnl_util::append_relu(po);
    attr.set_post_ops(po);
  }
  return attr;
}

/// One primitive for one input shape, with its weights already in the layout it wants.
struct CachedPrimitive {
  dnnl::primitive prim;
  memory weights;
  std::string impl;
  memory bias;  // set when the kernel halves the weights (see AdjustedLayer), else the shared one
};

/// oneDNN's x8s8s32x convolutions on CPUs without VNNI, given s8 src, ask in the weights descriptor
/// (extra.scale_adjust = 0.5) to multiply the weights by 0.5 in the reorder (rounding) and to undo it
/// with output scales x 2 and bias x 0.5. Rounding odd weights would break bit-exactness with the
/// integer reference, so we hand oneDNN 2 q_w (exact under halving: |q_w| <= 63 after the
/// reduced range, int8_cpu.h), output scales x 0.5 and bias x 2; all scalings are powers of two, so
/// oneDNN's float results equal the reference's bit for bit.
float weights_scale_adjust(const memory::desc& md) {
  const auto& extra = md.data.extra;
  return (extra.flags & dnnl_memory_extra_flag_scale_adjust) ? extra.scale_adjust : 1.0f;
}

struct AdjustedLayer {
  std::vector<float> output_scales, bias;
  Tensor weights_q;
};

/// The values to hand oneDNN for a kernel with weights scale adjust `adj` (1: the layer as is).
AdjustedLayer adjust_for_kernel(const Int8LayerData& L, float adj) {
  if (adj == 1.0f)
    return {L.output_scales, L.bias_acc, L.weights_q};
  LATHE_CHECK(adj == 0.5f && L.weights.qmax() <= 63, "oneDNN int8 kernel halves the weights (scale adjust ", adj,
              ") but the layer's weights use ", L.weights.bits,
              " bits; use Int8WeightRange::auto_for_cpu or reduced on this CPU (", cpu_int8_isa_name(), ")");
  AdjustedLayer a{L.output_scales, L.bias_acc, Tensor::empty(L.weights_q.shape(), DType::s8)};
  for (float& v : a.output_scales)
    v *= 0.5f;
  for (float& v : a.bias)
    v *= 2.0f;
  const int8_t* src = L.weights_q.data<int8_t>();
  int8_t* dst = a.weights_q.data<int8_t>();
  for (int64_t i = 0; i < L.weights_q.numel(); ++i)
    dst[i] = static_cast<int8_t>(2 * src[i]);
  return a;
}

std::string shape_key(const Tensor& t) {
  std::string k;
  for (int64_t d : t.shape())
    k += std::to_string(d) + ',';
  for (int64_t s : t.strides())
    k += std::to_string(s) + ';';
  return k;
}

/// Engine, stream, the constant memories (bias, zero points) and the per-shape primitives.
struct Int8Runtime {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  memory bias, zp_src, zp_dst;
  std::unordered_map<std::string, CachedPrimitive> cache;
  std::string last_impl;

  explicit Int8Runtime(const Int8LayerData& L, const memory::desc& bias_md) {
    if (L.has_bias) {
      bias = memory(bias_md, eng);
      std::memcpy(bias.get_data_handle(), L.bias_acc.data(), L.bias_acc.size() * sizeof(float));
    }
    zp_src = memory(memory::desc({1}, dt::s32, tag::a), eng);
    zp_dst = memory(memory::desc({1}, dt::s32, tag::a), eng);
    *static_cast<int32_t*>(zp_src.get_data_handle()) = L.config.src.zero_point[0];
    *static_cast<int32_t*>(zp_dst.get_data_handle()) = dst_zero_point(L);
  }

  /// Reorders the plain s8 weights into `wanted` (computing oneDNN's s8-src compensation if the
  /// layout asks for it).
  memory prepare_weights(const memory::desc& plain, const Tensor& wq, const memory::desc& wanted) {
    memory user(plain, eng, wq.raw());
    memory w(wanted, eng);
    dnnl::reorder(user, w).execute(strm, user, w);
    strm.wait();
    return w;
  }

  void run(const Int8LayerData& L, CachedPrimitive& p, const Tensor& src, memory::desc src_md, const Tensor& dst,
           memory::desc dst_md) {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(src_md, eng, src.raw())},
                                         {DNNL_ARG_WEIGHTS, p.weights},
                                         {DNNL_ARG_DST, memory(dst_md, eng, dst.raw())}};
    if (L.has_bias)
      args.emplace(DNNL_ARG_BIAS, p.bias ? p.bias : bias);
    if (L.config.src.zero_point[0] != 0)
      args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_src);
    if (dst_zero_point(L) != 0)
      args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, zp_dst);
    try {
      p.prim.execute(strm, args);
      strm.wait();
    } catch (const dnnl::error& e) {
      LATHE_FAIL("oneDNN int8 ", p.impl, " failed on src ", src.describe(), ": ", e.what());
    }
    last_impl = p.impl;
  }
};

}  // namespace

struct Int8Linear::Impl : Int8Runtime {
  using Int8Runtime::Int8Runtime;
};
struct Int8Conv2d::Impl : Int8Runtime {
  using Int8Runtime::Int8Runtime;
};

// ---------------------------------------------------------------- Int8Linear (matmul)
Int8Linear::Int8Linear(const Tensor& weights, const Tensor* bias, const Int8LayerConfig& config)
    : m_layer(make_int8_layer(weights, bias, config)) {
  LATHE_CHECK(weights.ndim() == 2, "Int8Linear weights must be [O, K], got ", weights.describe());
  m_impl = std::make_unique<Impl>(m_layer, memory::desc({1, m_layer.out_channels()}, dt::f32, tag::ab));
}
Int8Linear::~Int8Linear() = default;
Int8Linear::Int8Linear(Int8Linear&&) noexcept = default;
Int8Linear& Int8Linear::operator=(Int8Linear&&) noexcept = default;

std::string Int8Linear::implementation() const { return m_impl->last_impl; }

Tensor Int8Linear::forward_reference(const Tensor& src) const { return int8_linear_reference(m_layer, src); }

Tensor Int8Linear::forward(const Tensor& src) {
  const int64_t K = m_layer.weights_q.dim(1), O = m_layer.out_channels();
  LATHE_CHECK(src.device().is_cpu() && src.ndim() == 2 && src.dim(1) == K && src.dtype() == m_layer.src_dtype(),
              "Int8Linear::forward: src must be host [N, ", K, "] ", dtype_name(m_layer.src_dtype()), ", got ",
              src.describe());
  const int64_t N = src.dim(0);
  const memory::desc src_md({N, K}, to_dnnl(src.dtype()), memory::dims{src.stride(0), src.stride(1)});
  const memory::desc dst_md({N, O}, to_dnnl(m_layer.dst_dtype()), tag::ab);
  Tensor dst = Tensor::empty({N, O}, m_layer.dst_dtype());
  if (N == 0)
    return dst;
  const std::string key = shape_key(src);
  auto it = m_impl->cache.find(key);
  if (it == m_impl->cache.end()) {
    try {
      const memory::desc w_any({K, O}, dt::s8, tag::any);
      const memory::desc w_plain({K, O}, dt::s8, memory::dims{1, K});  // [O, K] read as its transpose
      const memory::desc b_md({1, O}, dt::f32, tag::ab);
      const auto d = m_layer.has_bias ? dnnl::matmul::desc(src_md, w_any, b_md, dst_md)
                                      : dnnl::matmul::desc(src_md, w_any, dst_md);
      const dnnl::matmul::primitive_desc pd(d, make_attr(m_layer, m_layer.output_scales), m_impl->eng);
      LATHE_CHECK(weights_scale_adjust(pd.weights_desc()) == 1.0f, "oneDNN int8 matmul ", pd.impl_info_str(),
                  " wants scaled weights, which Int8Linear does not handle");
      CachedPrimitive p{dnnl::matmul(pd),
                        m_impl->prepare_weights(w_plain, m_layer.weights_q, pd.weights_desc()),
                        pd.impl_info_str(),
                        {}};
      it = m_impl->cache.emplace(key, std::move(p)).first;
    } catch (const dnnl::error& e) {
      LATHE_FAIL("oneDNN int8 matmul unavailable for src ", src.describe(), " -> ", dtype_name(m_layer.dst_dtype()),
                 ": ", e.what());
    }
  }
  m_impl->run(m_layer, it->second, src, src_md, dst, dst_md);
  return dst;
}

// ---------------------------------------------------------------- Int8Conv2d (convolution)
Int8Conv2d::Int8Conv2d(const ConvParams& p, const Tensor& weights, const Tensor* bias, const Int8LayerConfig& config)
    : m_params(p), m_layer(make_int8_layer(weights, bias, config)) {
  LATHE_CHECK(weights.ndim() == 4, "Int8Conv2d weights must be [O, C, KH, KW], got ", weights.describe());
  LATHE_CHECK(p.stride_h >= 1 && p.stride_w >= 1 && p.pad_h >= 0 && p.pad_w >= 0, "Int8Conv2d: bad stride/padding");
  m_impl = std::make_unique<Impl>(m_layer, memory::desc({m_layer.out_channels()}, dt::f32, tag::a));
}
Int8Conv2d::~Int8Conv2d() = default;
Int8Conv2d::Int8Conv2d(Int8Conv2d&&) noexcept = default;
Int8Conv2d& Int8Conv2d::operator=(Int8Conv2d&&) noexcept = default;

std::string Int8Conv2d::implementation() const { return m_impl->last_impl; }

Tensor Int8Conv2d::forward_reference(const Tensor& src) const { return int8_conv2d_reference(m_layer, m_params, src); }

Tensor Int8Conv2d::forward(const Tensor& src) {
  const Tensor& wq = m_layer.weights_q;
  const int64_t C = wq.dim(1), O = wq.dim(0), KH = wq.dim(2), KW = wq.dim(3);
  LATHE_CHECK(src.device().is_cpu() && src.ndim() == 4 && src.dim(1) == C && src.dtype() == m_layer.src_dtype(),
              "Int8Conv2d::forward: src must be host [N, ", C, ", H, W] ", dtype_name(m_layer.src_dtype()), ", got ",
              src.describe());
  LATHE_CHECK(src.is_channels_last(), "Int8Conv2d::forward wants channels-last (NHWC) src, got ", src.describe(),
              "; quantize a channels-last f32 tensor");
  const ConvParams& p = m_params;
  const int64_t N = src.dim(0), H = src.dim(2), W = src.dim(3);
  const int64_t OH = conv_out_size(H, KH, p.stride_h, p.pad_h), OW = conv_out_size(W, KW, p.stride_w, p.pad_w);
  LATHE_CHECK(OH > 0 && OW > 0, "Int8Conv2d::forward: empty output for ", src.describe());
  const memory::desc src_md({N, C, H, W}, to_dnnl(src.dtype()), tag::acdb);
  const memory::desc dst_md({N, O, OH, OW}, to_dnnl(m_layer.dst_dtype()), tag::acdb);
  Tensor dst = Tensor::empty({N, O, OH, OW}, m_layer.dst_dtype(), Device::cpu(), MemoryFormat::channels_last);
  if (N == 0)
    return dst;
  const std::string key = shape_key(src);
  auto it = m_impl->cache.find(key);
  if (it == m_impl->cache.end()) {
    try {
      const memory::dims strides{p.stride_h, p.stride_w}, pl{p.pad_h, p.pad_w};
      const memory::dims pr{(OH - 1) * p.stride_h + KH - H - p.pad_h, (OW - 1) * p.stride_w + KW - W - p.pad_w};
      const memory::desc w_any({O, C, KH, KW}, dt::s8, tag::any);
      const memory::desc w_plain({O, C, KH, KW}, dt::s8, tag::oihw);
      const memory::desc b_md({O}, dt::f32, tag::a);
      const auto fwd = dnnl::prop_kind::forward_inference;
      const auto alg = dnnl::algorithm::convolution_direct;
      const auto d = m_layer.has_bias
                         ? dnnl::convolution_forward::desc(fwd, alg, src_md, w_any, b_md, dst_md, strides, pl, pr)
                         : dnnl::convolution_forward::desc(fwd, alg, src_md, w_any, dst_md, strides, pl, pr);
      dnnl::convolution_forward::primitive_desc pd(d, make_attr(m_layer, m_layer.output_scales), m_impl->eng);
      const float adj = weights_scale_adjust(pd.weights_desc());
      const AdjustedLayer a = adjust_for_kernel(m_layer, adj);
      if (adj != 1.0f)
        pd = dnnl::convolution_forward::primitive_desc(d, make_attr(m_layer, a.output_scales), m_impl->eng);
      CachedPrimitive cp{dnnl::convolution_forward(pd),
                         m_impl->prepare_weights(w_plain, a.weights_q, pd.weights_desc()),
                         pd.impl_info_str(),
                         {}};
      if (adj != 1.0f && m_layer.has_bias) {
        cp.bias = memory(b_md, m_impl->eng);
        std::memcpy(cp.bias.get_data_handle(), a.bias.data(), a.bias.size() * sizeof(float));
      }
      it = m_impl->cache.emplace(key, std::move(cp)).first;
    } catch (const dnnl::error& e) {
      LATHE_FAIL("oneDNN int8 convolution unavailable for src ", src.describe(), " -> ",
                 dtype_name(m_layer.dst_dtype()), ": ", e.what());
    }
  }
  m_impl->run(m_layer, it->second, src, src_md, dst, dst_md);
  return dst;
}

}  // namespace lathe
