// The op contract checks (see op_contract.h) and the prepared kernels' checked entry points.
#include "engine/backend/op_contract.h"

#include "engine/backend/backend.h"

namespace lathe::contract {

namespace {

bool is_8bit(DType d) { return d == DType::s8 || d == DType::u8; }
std::string of(const Tensor* t) { return t ? t->describe() : std::string("none"); }

}  // namespace

void linear_forward(const Tensor& src, const Tensor& weights, const Tensor* bias, const Tensor& dst) {
  const bool shapes = src.ndim() == 2 && weights.ndim() == 2 && dst.ndim() == 2 && src.dim(1) == weights.dim(1) &&
                      dst.dim(0) == src.dim(0) && dst.dim(1) == weights.dim(0) &&
                      (!bias || (bias->ndim() == 1 && bias->dim(0) == weights.dim(0)));
  LATHE_CHECK(shapes && is_floating(src.dtype()) && is_floating(weights.dtype()) && is_floating(dst.dtype()),
              "linear_forward: want src [N, K], weights [O, K], bias [O], dst [N, O] (float); got src ", src.describe(),
              ", weights ", weights.describe(), ", bias ", of(bias), ", dst ", dst.describe());
  LATHE_CHECK(src.device() == weights.device() && src.device() == dst.device(), "linear_forward: src on ",
              src.device().str(), ", weights on ", weights.device().str(), ", dst on ", dst.device().str());
}

void linear_backward_data(const Tensor& diff_dst, const Tensor& weights, const Tensor& diff_src) {
  const bool shapes = diff_dst.ndim() == 2 && weights.ndim() == 2 && diff_src.ndim() == 2 &&
                      diff_dst.dim(1) == weights.dim(0) && diff_src.dim(0) == diff_dst.dim(0) &&
                      diff_src.dim(1) == weights.dim(1);
  LATHE_CHECK(shapes && is_floating(diff_dst.dtype()) && is_floating(weights.dtype()) && is_floating(diff_src.dtype()),
              "linear_backward_data: want diff_dst [N, O], weights [O, K], diff_src [N, K] (float); got diff_dst ",
              diff_dst.describe(), ", weights ", weights.describe(), ", diff_src ", diff_src.describe());
  LATHE_CHECK(diff_dst.device() == weights.device() && diff_dst.device() == diff_src.device(),
              "linear_backward_data: diff_dst on ", diff_dst.device().str(), ", weights on ", weights.device().str(),
              ", diff_src on ", diff_src.device().str());
}

void linear_backward_weights(const Tensor& src, const Tensor& diff_dst, const Tensor& diff_weights,
                             const Tensor* diff_bias) {
  const bool shapes = src.ndim() == 2 && diff_dst.ndim() == 2 && diff_weights.ndim() == 2 &&
                      src.dim(0) == diff_dst.dim(0) && diff_weights.dim(0) == diff_dst.dim(1) &&
                      diff_weights.dim(1) == src.dim(1) &&
                      (!diff_bias || (diff_bias->ndim() == 1 && diff_bias->dim(0) == diff_dst.dim(1)));
  LATHE_CHECK(shapes && is_floating(src.dtype()) && is_floating(diff_dst.dtype()) && is_floating(diff_weights.dtype()),
              "linear_backward_weights: want src [N, K], diff_dst [N, O], diff_weights [O, K], diff_bias [O] "
              "(float); got src ",
              src.describe(), ", diff_dst ", diff_dst.describe(), ", diff_weights ", diff_weights.describe(),
              ", diff_bias ", of(diff_bias));
  LATHE_CHECK(src.device() == diff_dst.device() && src.device() == diff_weights.device(),
              "linear_backward_weights: src on ", src.device().str(), ", diff_dst on ", diff_dst.device().str(),
              ", diff_weights on ", diff_weights.device().str());
}

void conv2d_forward(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                    const Tensor& dst, const char* op) {
  LATHE_CHECK(p.stride_h > 0 && p.stride_w > 0 && p.pad_h >= 0 && p.pad_w >= 0, op, ": stride ", p.stride_h, "x",
              p.stride_w, " and padding ", p.pad_h, "x", p.pad_w, " (need stride > 0, padding >= 0)");
  bool shapes = src.ndim() == 4 && weights.ndim() == 4 && dst.ndim() == 4 && src.dim(1) == weights.dim(1) &&
                dst.dim(0) == src.dim(0) && dst.dim(1) == weights.dim(0) &&
                (!bias || (bias->ndim() == 1 && bias->dim(0) == weights.dim(0)));
  if (shapes) {
    const int64_t oh = (src.dim(2) + 2 * p.pad_h - weights.dim(2)) / p.stride_h + 1;
    const int64_t ow = (src.dim(3) + 2 * p.pad_w - weights.dim(3)) / p.stride_w + 1;
    shapes = oh > 0 && ow > 0 && dst.dim(2) == oh && dst.dim(3) == ow;
  }
  LATHE_CHECK(shapes && is_floating(src.dtype()) && is_floating(weights.dtype()) && is_floating(dst.dtype()), op,
              ": want src [N, C, H, W], weights [O, C, KH, KW], bias [O], dst [N, O, OH, OW] (float, "
              "OH and OW from stride ",
              p.stride_h, "x", p.stride_w, ", padding ", p.pad_h, "x", p.pad_w, "); got src ", src.describe(),
              ", weights ", weights.describe(), ", bias ", of(bias), ", dst ", dst.describe());
  LATHE_CHECK(src.device() == weights.device() && src.device() == dst.device(), op, ": src on ", src.device().str(),
              ", weights on ", weights.device().str(), ", dst on ", dst.device().str());
}

void int8_layer(const Int8LayerData& L, const ConvParams* conv) {
  const char* op = conv ? "int8 conv2d" : "int8 linear";
  const Tensor& w = L.weights_q;
  LATHE_CHECK(
      w.defined() && w.dtype() == DType::s8 && w.device().is_cpu() && w.is_contiguous() && w.ndim() == (conv ? 4 : 2),
      op, ": weights must be contiguous host s8 ", conv ? "[O, C, KH, KW]" : "[O, K]", ", got ",
      w.defined() ? w.describe() : std::string("none"));
  const size_t O = static_cast<size_t>(w.dim(0));
  LATHE_CHECK(L.output_scales.size() == O && L.bias_acc.size() == O && L.weights.channels() == w.dim(0), op,
              ": weights ", w.describe(), " with ", L.output_scales.size(), " output scales, ", L.bias_acc.size(),
              " bias entries and ", L.weights.channels(), " weight scales (need one each per output channel)");
  L.config.src.validate();
  LATHE_CHECK(!L.config.src.per_channel() && L.config.src.bits == 8, op,
              ": src parameters must be 8-bit per tensor, got ", L.config.src.describe());
  if (L.config.dst) {
    L.config.dst->validate();
    LATHE_CHECK(!L.config.dst->per_channel() && L.config.dst->bits == 8, op,
                ": dst parameters must be 8-bit per tensor, got ", L.config.dst->describe());
  }
  if (conv)
    LATHE_CHECK(conv->stride_h > 0 && conv->stride_w > 0 && conv->pad_h >= 0 && conv->pad_w >= 0, op, ": stride ",
                conv->stride_h, "x", conv->stride_w, " and padding ", conv->pad_h, "x", conv->pad_w,
                " (need stride > 0, padding >= 0)");
}

void int8_forward(const Int8Kernel& k, const Tensor& src, Device device) {
  const Int8LayerData& L = k.layer();
  const Tensor& w = L.weights_q;
  const DType want = L.src_dtype();
  if (!k.is_conv()) {
    LATHE_CHECK(src.ndim() == 2 && src.dim(1) == w.dim(1) && src.dtype() == want && src.stride(1) == 1 &&
                    src.device() == device,
                k.op_name(), ": src must be [N, ", w.dim(1), "] ", dtype_name(want), " with dense rows on ",
                device.str(), " (weights ", w.describe(), "), got ", src.describe(), " on ", src.device().str());
    return;
  }
  LATHE_CHECK(src.ndim() == 4 && src.dim(1) == w.dim(1) && src.dtype() == want && src.device() == device, k.op_name(),
              ": src must be [N, ", w.dim(1), ", H, W] ", dtype_name(want), " on ", device.str(), " (weights ",
              w.describe(), "), got ", src.describe(), " on ", src.device().str());
  LATHE_CHECK(src.is_channels_last(), k.op_name(), ": src must be channels-last (NHWC), got ", src.describe(),
              "; quantize a channels-last f32 tensor");
  const ConvParams& p = k.conv_params();
  const int64_t oh = (src.dim(2) + 2 * p.pad_h - w.dim(2)) / p.stride_h + 1;
  const int64_t ow = (src.dim(3) + 2 * p.pad_w - w.dim(3)) / p.stride_w + 1;
  LATHE_CHECK(oh > 0 && ow > 0, k.op_name(), ": src ", src.describe(), " is too small for weights ", w.describe(),
              " with padding ", p.pad_h, "x", p.pad_w);
}

void sparse_matrix(const CsrMatrix& a) {
  LATHE_CHECK(a.rows >= 0 && a.cols >= 0 && static_cast<int64_t>(a.row_ptr.size()) == a.rows + 1,
              "sparse_matmul: CSR matrix [", a.rows, ", ", a.cols, "] has ", a.row_ptr.size(), " row pointers");
  a.validate();
}

void sparse_matmul(const CsrMatrix& a, const Tensor& b, const Tensor* bias, const Tensor& c, Device device) {
  const bool shapes = b.ndim() == 2 && c.ndim() == 2 && b.dim(0) == a.cols && c.dim(0) == a.rows &&
                      b.dim(1) == c.dim(1) && (!bias || (bias->ndim() == 1 && bias->dim(0) == a.rows));
  const bool types = b.dtype() == DType::f32 && c.dtype() == DType::f32 && (!bias || bias->dtype() == DType::f32);
  LATHE_CHECK(shapes && types, "sparse_matmul: A [", a.rows, ", ", a.cols, "] needs b [", a.cols, ", n], c [", a.rows,
              ", n], bias [", a.rows, "] (f32); got b ", b.describe(), ", c ", c.describe(), ", bias ", of(bias));
  LATHE_CHECK((b.numel() == 0 || b.stride(1) == 1) && (c.numel() == 0 || c.stride(1) == 1) &&
                  (!bias || bias->numel() <= 1 || bias->stride(0) == 1),
              "sparse_matmul: b, c and bias need dense rows, got b ", b.describe(), ", c ", c.describe());
  LATHE_CHECK(b.device() == device && c.device() == device && (!bias || bias->device() == device),
              "sparse_matmul: operands on ", b.device().str(), " / ", c.device().str(), ", the kernel on ",
              device.str());
}

void sparse_matmul_rows(const CsrMatrix& a, const SpmmArgs& x) {
  LATHE_CHECK(x.n >= 0 && x.ldb >= x.n && x.ldc >= x.n, "sparse_matmul: n ", x.n, ", ldb ", x.ldb, ", ldc ", x.ldc,
              " (need ldb, ldc >= n >= 0)");
  LATHE_CHECK((x.b || a.cols == 0 || x.n == 0) && (x.c || a.rows == 0 || x.n == 0), "sparse_matmul: null B or C");
}

void quantize(const Tensor& src, const QuantParams& params, const Tensor& dst) {
  LATHE_CHECK(src.dtype() == DType::f32 && dst.dtype() == params.storage_dtype() && src.shape() == dst.shape() &&
                  src.device() == dst.device() && !params.per_channel(),
              "quantize: want f32 src and ", dtype_name(params.storage_dtype()),
              " dst of one shape on one device, per-tensor parameters; got src ", src.describe(), ", dst ",
              dst.describe(), ", parameters ", params.describe());
}

void dequantize(const Tensor& src, const QuantParams& params, const Tensor& dst) {
  LATHE_CHECK(src.dtype() == params.storage_dtype() && dst.dtype() == DType::f32 && src.shape() == dst.shape() &&
                  src.device() == dst.device() && !params.per_channel(),
              "dequantize: want ", dtype_name(params.storage_dtype()),
              " src and f32 dst of one shape on one device, per-tensor parameters; got src ", src.describe(), ", dst ",
              dst.describe(), ", parameters ", params.describe());
}

void int8_maxpool2d(const PoolParams& p, const Tensor& src, const Tensor& dst) {
  bool ok = src.ndim() == 4 && is_8bit(src.dtype()) && src.is_channels_last() && src.is_dense() && dst.ndim() == 4 &&
            dst.dtype() == src.dtype() && dst.is_channels_last() && dst.is_dense() && dst.dim(0) == src.dim(0) &&
            dst.dim(1) == src.dim(1) && src.device() == dst.device() && p.kernel_h > 0 && p.kernel_w > 0 &&
            p.stride_h > 0 && p.stride_w > 0;
  if (ok)
    ok = dst.dim(2) == (src.dim(2) + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1 &&
         dst.dim(3) == (src.dim(3) + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1 && dst.dim(2) > 0 && dst.dim(3) > 0;
  LATHE_CHECK(ok,
              "int8 maxpool2d: want dense channels-last s8/u8 src [N, C, H, W] and dst [N, C, OH, OW] of its dtype "
              "(kernel ",
              p.kernel_h, "x", p.kernel_w, ", stride ", p.stride_h, "x", p.stride_w, "); got src ", src.describe(),
              ", dst ", dst.describe());
}

void int8_relu(const Tensor& t) {
  LATHE_CHECK(is_8bit(t.dtype()) && t.is_dense(), "int8 relu: want a dense s8/u8 tensor, got ", t.describe());
}

}  // namespace lathe::contract

namespace lathe {

Int8Kernel::Int8Kernel(const Int8LayerData& layer, const ConvParams* conv, Device device)
    : m_layer(layer), m_is_conv(conv != nullptr), m_conv(conv ? *conv : ConvParams{}), m_device(device) {
  contract::int8_layer(layer, conv);
}

bool Int8Kernel::fuse_maxpool(const PoolParams& pool) {
  if (!m_is_conv || m_pool_fused || !m_layer.config.dst || !can_fuse_maxpool(pool))
    return false;
  m_pool = pool;
  m_pool_fused = true;
  return true;
}

Tensor Int8Kernel::forward(const Tensor& src) {
  contract::int8_forward(*this, src, m_device);
  if (src.dim(0) == 0) {
    const int64_t O = m_layer.out_channels();
    if (!m_is_conv)
      return Tensor::empty({0, O}, m_layer.dst_dtype(), m_device);
    const Tensor& w = m_layer.weights_q;
    int64_t oh = conv_out_size(src.dim(2), w.dim(2), m_conv.stride_h, m_conv.pad_h);
    int64_t ow = conv_out_size(src.dim(3), w.dim(3), m_conv.stride_w, m_conv.pad_w);
    if (m_pool_fused) {
      oh = conv_out_size(oh, m_pool.kernel_h, m_pool.stride_h, m_pool.pad_h);
      ow = conv_out_size(ow, m_pool.kernel_w, m_pool.stride_w, m_pool.pad_w);
    }
    return Tensor::empty({0, O, oh, ow}, m_layer.dst_dtype(), m_device, MemoryFormat::channels_last);
  }
  return run(src);
}

void SparseMatmulKernel::run(const Tensor& b, const Tensor* bias, Tensor& c, PostOp post) {
  contract::sparse_matmul(m_a, b, bias, c, m_device);
  SpmmArgs args;
  args.n = b.dim(1);
  args.b = b.numel() ? static_cast<const float*>(b.raw()) : nullptr;
  args.ldb = b.dim(0) > 1 ? b.stride(0) : args.n;
  args.c = c.numel() ? static_cast<float*>(c.raw()) : nullptr;
  args.ldc = c.dim(0) > 1 ? c.stride(0) : args.n;
  args.bias = bias && bias->numel() ? static_cast<const float*>(bias->raw()) : nullptr;
  args.relu = post == PostOp::relu;
  if (a_empty_work(args))
    return;
  run_impl(args);
}

void SparseMatmulKernel::run_rows(const SpmmArgs& args) {
  contract::sparse_matmul_rows(m_a, args);
  if (a_empty_work(args))
    return;
  run_impl(args);
}

bool SparseMatmulKernel::a_empty_work(const SpmmArgs& args) const { return args.n == 0 || m_a.rows == 0; }

}  // namespace lathe
