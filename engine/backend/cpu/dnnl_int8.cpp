// The cpu backend's INT8 linear and conv2d: oneDNN 2.x int8 matmul and convolution, s8 weights x
// u8/s8 activations -> s32 -> requantized to s8/u8 (or f32 for the last layer) with per-output-
// channel output scales, fused bias and ReLU; the arithmetic of formats/int8_layer_data.h, bit for
// bit with the reference backend's integer loops. Primitives are cached per input shape. Also the
// backend's int8 max pooling (int8_pool.h: a 2x2 stride-2 fast path). A single-input-channel conv
// with the pooling after it fused in (Int8Kernel::fuse_maxpool) runs Lathe's own kernel instead
// (int8_conv_c1.h: oneDNN's kernels vectorise over input channels, and there is one).
//
// oneDNN 2.x attributes used: set_output_scales(mask 1 << 1, s_x s_w[o] / s_y), runtime zero points
// for src and dst (only when non-zero), an eltwise ReLU post-op; bias passed in f32 accumulator
// units. Weights are reordered once per primitive into the layout oneDNN picks (format `any`,
// which carries the s8-src compensation). Conv activations are channels-last (NHWC), what the
// x86 int8 kernels run on without reorders.
// CPUs without VNNI: the weights are 7-bit (int8_cpu.h) so oneDNN's s16 pair sums cannot saturate,
// and where a convolution asks to halve s8 weights (s8 src, "scale_adjust" 0.5) it is handed 2 q_w
// with compensating power-of-two scales, so the results stay bit-exact with the reference.
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/dnnl_util.h"
#include "engine/backend/cpu/int8_conv_c1.h"
#include "engine/backend/cpu/int8_cpu.h"
#include "engine/backend/cpu/int8_pool.h"
#include "engine/backend/cpu/quantize_kernels.h"

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

/// A prepared oneDNN int8 linear or conv2d (the contract is checked by Int8Kernel::forward).
class DnnlInt8Kernel final : public Int8Kernel {
 public:
  DnnlInt8Kernel(const Int8LayerData& layer, const ConvParams* conv)
      : Int8Kernel(layer, conv, Device::cpu()),
        m_rt(layer, conv ? memory::desc({layer.out_channels()}, dt::f32, tag::a)
                         : memory::desc({1, layer.out_channels()}, dt::f32, tag::ab)) {}
  std::string implementation() const override {
    return fused_maxpool() ? "lathe:avx512_vnni_conv_c1+maxpool" : m_rt.last_impl;
  }

 protected:
  Tensor run(const Tensor& src) override {
    if (const PoolParams* pool = fused_maxpool()) {
      if (!m_c1)
        m_c1 = std::make_unique<cpu::Int8ConvC1Pool>(layer(), conv_params(), *pool);
      return m_c1->run(src);
    }
    return is_conv() ? run_conv(src) : run_linear(src);
  }
  bool can_fuse_maxpool(const PoolParams& pool) const override {
    return is_conv() && cpu::int8_conv_c1_pool_applies(layer(), &conv_params(), pool);
  }

 private:
  Tensor run_linear(const Tensor& src);
  Tensor run_conv(const Tensor& src);
  Int8Runtime m_rt;
  std::unique_ptr<cpu::Int8ConvC1Pool> m_c1;  // set by the first forward after fuse_maxpool
};

Tensor DnnlInt8Kernel::run_linear(const Tensor& src) {
  const Int8LayerData& L = layer();
  const int64_t K = L.weights_q.dim(1), O = L.out_channels();
  const int64_t N = src.dim(0);
  const memory::desc src_md({N, K}, to_dnnl(src.dtype()), memory::dims{src.stride(0), src.stride(1)});
  const memory::desc dst_md({N, O}, to_dnnl(L.dst_dtype()), tag::ab);
  Tensor dst = Tensor::empty({N, O}, L.dst_dtype());
  const std::string key = shape_key(src);
  auto it = m_rt.cache.find(key);
  if (it == m_rt.cache.end()) {
    try {
      const memory::desc w_any({K, O}, dt::s8, tag::any);
      const memory::desc w_plain({K, O}, dt::s8, memory::dims{1, K});  // [O, K] read as its transpose
      const memory::desc b_md({1, O}, dt::f32, tag::ab);
      const auto d =
          L.has_bias ? dnnl::matmul::desc(src_md, w_any, b_md, dst_md) : dnnl::matmul::desc(src_md, w_any, dst_md);
      const dnnl::matmul::primitive_desc pd(d, make_attr(L, L.output_scales), m_rt.eng);
      LATHE_CHECK(weights_scale_adjust(pd.weights_desc()) == 1.0f, "oneDNN int8 matmul ", pd.impl_info_str(),
                  " wants scaled weights, which the int8 linear does not handle");
      CachedPrimitive p{
          dnnl::matmul(pd), m_rt.prepare_weights(w_plain, L.weights_q, pd.weights_desc()), pd.impl_info_str(), {}};
      it = m_rt.cache.emplace(key, std::move(p)).first;
    } catch (const dnnl::error& e) {
      LATHE_FAIL("oneDNN int8 matmul unavailable for src ", src.describe(), " -> ", dtype_name(L.dst_dtype()), ": ",
                 e.what());
    }
  }
  m_rt.run(L, it->second, src, src_md, dst, dst_md);
  return dst;
}

Tensor DnnlInt8Kernel::run_conv(const Tensor& src) {
  const Int8LayerData& L = layer();
  const Tensor& wq = L.weights_q;
  const int64_t C = wq.dim(1), O = wq.dim(0), KH = wq.dim(2), KW = wq.dim(3);
  const ConvParams& p = conv_params();
  const int64_t N = src.dim(0), H = src.dim(2), W = src.dim(3);
  const int64_t OH = conv_out_size(H, KH, p.stride_h, p.pad_h), OW = conv_out_size(W, KW, p.stride_w, p.pad_w);
  const memory::desc src_md({N, C, H, W}, to_dnnl(src.dtype()), tag::acdb);
  const memory::desc dst_md({N, O, OH, OW}, to_dnnl(L.dst_dtype()), tag::acdb);
  Tensor dst = Tensor::empty({N, O, OH, OW}, L.dst_dtype(), Device::cpu(), MemoryFormat::channels_last);
  const std::string key = shape_key(src);
  auto it = m_rt.cache.find(key);
  if (it == m_rt.cache.end()) {
    try {
      const memory::dims strides{p.stride_h, p.stride_w}, pl{p.pad_h, p.pad_w};
      const memory::dims pr{(OH - 1) * p.stride_h + KH - H - p.pad_h, (OW - 1) * p.stride_w + KW - W - p.pad_w};
      const memory::desc w_any({O, C, KH, KW}, dt::s8, tag::any);
      const memory::desc w_plain({O, C, KH, KW}, dt::s8, tag::oihw);
      const memory::desc b_md({O}, dt::f32, tag::a);
      const auto fwd = dnnl::prop_kind::forward_inference;
      const auto alg = dnnl::algorithm::convolution_direct;
      const auto d = L.has_bias
                         ? dnnl::convolution_forward::desc(fwd, alg, src_md, w_any, b_md, dst_md, strides, pl, pr)
                         : dnnl::convolution_forward::desc(fwd, alg, src_md, w_any, dst_md, strides, pl, pr);
      dnnl::convolution_forward::primitive_desc pd(d, make_attr(L, L.output_scales), m_rt.eng);
      const float adj = weights_scale_adjust(pd.weights_desc());
      const AdjustedLayer a = adjust_for_kernel(L, adj);
      if (adj != 1.0f)
        pd = dnnl::convolution_forward::primitive_desc(d, make_attr(L, a.output_scales), m_rt.eng);
      CachedPrimitive cp{dnnl::convolution_forward(pd),
                         m_rt.prepare_weights(w_plain, a.weights_q, pd.weights_desc()),
                         pd.impl_info_str(),
                         {}};
      if (adj != 1.0f && L.has_bias) {
        cp.bias = memory(b_md, m_rt.eng);
        std::memcpy(cp.bias.get_data_handle(), a.bias.data(), a.bias.size() * sizeof(float));
      }
      it = m_rt.cache.emplace(key, std::move(cp)).first;
    } catch (const dnnl::error& e) {
      LATHE_FAIL("oneDNN int8 convolution unavailable for src ", src.describe(), " -> ", dtype_name(L.dst_dtype()),
                 ": ", e.what());
    }
  }
  m_rt.run(L, it->second, src, src_md, dst, dst_md);
  return dst;
}

}  // namespace

std::unique_ptr<Int8Kernel> DnnlBackend::make_int8_kernel_impl(const Int8LayerData& layer, const ConvParams* conv) {
  return std::make_unique<DnnlInt8Kernel>(layer, conv);
}

void DnnlBackend::int8_maxpool2d_impl(const PoolParams& p, const Tensor& src, Tensor& dst) {
  int8_maxpool2d_fast_into(src, p, dst);
}

namespace {

/// Both dense with their elements in the same memory order: equal strides on every dimension longer
/// than 1 (a [N, 1, H, W] tensor is the same bytes contiguous and channels-last).
bool same_element_order(const Tensor& a, const Tensor& b) {
  if (!a.is_dense() || !b.is_dense() || a.shape() != b.shape())
    return false;
  for (size_t d = 0; d < a.shape().size(); ++d)
    if (a.dim(d) > 1 && a.strides()[d] != b.strides()[d])
      return false;
  return true;
}

}  // namespace

void DnnlBackend::quantize_impl(const Tensor& src, const QuantParams& params, Tensor& dst) {
  if (params.scale.size() != 1 || src.dtype() != DType::f32 || !same_element_order(src, dst))
    return ReferenceBackend::quantize_impl(src, params, dst);
  cpu::quantize_per_tensor(static_cast<const float*>(src.raw()), dst.raw(), params.is_signed, src.numel(),
                           params.scale[0], params.zero_point[0], params.qmin(), params.qmax());
}

}  // namespace lathe
