// Convolutions on cuDNN (see cudnn_ops.h).
//
// Layouts: each call settles on one activation format F (src's: NCHW or NHWC; anything else is
// first copied to NCHW). Activations in another layout are staged into F, outputs in another
// layout are computed into a staged tensor and copied back, and the filter is described (or
// staged) in F too, since cuDNN's FP32 kernels want x, w and y in one format. When cuDNN offers
// no algorithm in NHWC for a problem, the call falls back to NCHW (staging copies) and the cache
// remembers that. TF32 is excluded with CUDNN_FMA_MATH unless the context allows it.
//
// Mixed precision: bf16/f16 src, weights and gradients run as cuDNN's pseudo-half configuration
// (operands and the cuDNN output in bf16/f16, f32 arithmetic) on tensor-op math; the output is then
// widened into the f32 tensor the caller passed (the bias, ReLU and bias gradient work in f32). The
// layers round those results to bf16/f16 anyway (MatmulPrecision), so nothing is lost.
#include "engine/backend/cuda/cudnn_ops.h"

#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "engine/backend/cuda/cuda_tensor_util.h"
#include "kernels/bias_act.cuh"

namespace lathe::cuda {

namespace {

// ------------------------------------------------------------------ descriptors (RAII)
int to_int(int64_t v) {
  LATHE_CHECK(v >= 0 && v <= INT_MAX, "conv2d: size ", v, " exceeds cuDNN's 32-bit sizes");
  return static_cast<int>(v);
}

cudnnDataType_t cudnn_type(DType dt) {
  switch (dt) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    case DType::f16:
      return CUDNN_DATA_HALF;
    default:
      LATHE_FAIL("conv2d: cuDNN convolutions take f32, bf16 or f16, got ", dtype_name(dt));
  }
}

class TensorDesc {
 public:
  /// `t` must have `format`'s layout; the descriptor gets that format's canonical strides (a size-1
  /// dimension may carry any stride in a Tensor, but cuDNN wants one consistent packing).
  TensorDesc(const Tensor& t, MemoryFormat format) {
    LATHE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m_desc));
    const Shape& s = t.shape();
    const auto st = format == MemoryFormat::channels_last ? channels_last_strides(s) : contiguous_strides(s);
    LATHE_CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(m_desc, cudnn_type(t.dtype()), to_int(s[0]), to_int(s[1]),
                                                   to_int(s[2]), to_int(s[3]), to_int(st[0]), to_int(st[1]),
                                                   to_int(st[2]), to_int(st[3])));
  }
  ~TensorDesc() { (void)cudnnDestroyTensorDescriptor(m_desc); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  operator cudnnTensorDescriptor_t() const { return m_desc; }

 private:
  cudnnTensorDescriptor_t m_desc = nullptr;
};

class FilterDesc {
 public:
  FilterDesc(const Tensor& w, MemoryFormat format) {
    LATHE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&m_desc));
    LATHE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(
        m_desc, cudnn_type(w.dtype()), format == MemoryFormat::channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
        to_int(w.dim(0)), to_int(w.dim(1)), to_int(w.dim(2)), to_int(w.dim(3))));
  }
  ~FilterDesc() { (void)cudnnDestroyFilterDescriptor(m_desc); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  operator cudnnFilterDescriptor_t() const { return m_desc; }

 private:
  cudnnFilterDescriptor_t m_desc = nullptr;
};

class ConvDesc {
 public:
  ConvDesc(const ConvParams& p, cudnnMathType_t math) {
    LATHE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&m_desc));
    LATHE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(m_desc, to_int(p.pad_h), to_int(p.pad_w), to_int(p.stride_h),
                                                      to_int(p.stride_w), 1, 1, CUDNN_CROSS_CORRELATION,
                                                      CUDNN_DATA_FLOAT));
    LATHE_CUDNN_CHECK(cudnnSetConvolutionMathType(m_desc, math));
  }
  ~ConvDesc() { (void)cudnnDestroyConvolutionDescriptor(m_desc); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  operator cudnnConvolutionDescriptor_t() const { return m_desc; }

 private:
  cudnnConvolutionDescriptor_t m_desc = nullptr;
};

// ------------------------------------------------------------------ checks and staging
/// The format of `primary` (src, or diff_src); when it fits both (C = 1, or 1x1 images), the
/// format of `other` (the output or gradient), so the common NHWC first layer needs no staging.
MemoryFormat activation_format(const Tensor& primary, const Tensor& other) {
  const bool nchw = has_layout(primary, MemoryFormat::contiguous);
  const bool nhwc = has_layout(primary, MemoryFormat::channels_last);
  if (nchw && nhwc)
    return has_layout(other, MemoryFormat::channels_last) ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  return nhwc ? MemoryFormat::channels_last : MemoryFormat::contiguous;
}

/// `t` itself when it has `format`'s layout, else a device copy in that format.
Tensor in_format(CudaContext& ctx, const Tensor& t, MemoryFormat format) {
  if (has_layout(t, format))
    return t;
  Tensor out = device_empty(ctx, t.shape(), t.dtype(), format);
  device_strided_copy(ctx, t, out);
  return out;
}

/// An output tensor in `format`: `dst` itself when it already is, else a temporary to copy back.
Tensor output_in_format(CudaContext& ctx, Tensor& dst, MemoryFormat format) {
  if (has_layout(dst, format))
    return dst;
  return device_empty(ctx, dst.shape(), dst.dtype(), format);
}

void copy_back(CudaContext& ctx, const Tensor& out, Tensor& dst) {
  if (!out.same_memory(dst))
    device_strided_copy(ctx, out, dst);
}

/// Tensor-op math for bf16/f16 operands (their point); for f32, TF32 only when the context allows it.
cudnnMathType_t math_type(const CudaContext& ctx, DType operands) {
  if (is_half(operands))
    return CUDNN_TENSOR_OP_MATH;
  return ctx.allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

enum class ConvKind : int64_t { forward = 0, backward_data = 1, backward_filter = 2 };

std::vector<int64_t> problem_key(ConvKind kind, const ConvParams& p, const Tensor& x, const Tensor& w,
                                 MemoryFormat format, const CudaContext& ctx) {
  return {static_cast<int64_t>(kind),
          x.dim(0),
          x.dim(1),
          x.dim(2),
          x.dim(3),
          w.dim(0),
          w.dim(2),
          w.dim(3),
          p.stride_h,
          p.stride_w,
          p.pad_h,
          p.pad_w,
          static_cast<int64_t>(format),
          ctx.allow_tf32() ? 1 : 0,
          static_cast<int64_t>(x.dtype())};
}

/// Picks the first result that ran (Find) or is supported (Get_v7), fits the workspace limit and,
/// for f32 operands with TF32 off, does not use tensor-op math; algo -1 when none does.
template <class Perf>
ConvAlgoChoice pick(const Perf* results, int count, const CudaContext& ctx, DType operands) {
  const bool tensor_ops_ok = is_half(operands) || ctx.allow_tf32();
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > ctx.max_workspace_bytes())
      continue;
    if (!tensor_ops_ok && (r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    return {static_cast<int>(r.algo), r.memory, math_type(ctx, operands)};
  }
  return {};
}

constexpr int kMaxAlgos = 16;

// One chooser per direction: cuDNN's three families differ only in types and function names. A
// choice with algo -1 means no usable algorithm in this format.
ConvAlgoChoice choose_forward(CudaContext& ctx, const std::vector<int64_t>& key, DType operands, const TensorDesc& xd,
                              const FilterDesc& wd, const ConvDesc& cd, const TensorDesc& yd) {
  auto& cache = ctx.conv_algo_cache();
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  cudnnConvolutionFwdAlgoPerf_t perf[kMaxAlgos];
  int n = 0;
  if (ctx.benchmark_conv_algos()) {
    LATHE_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(ctx.cudnn(), xd, wd, cd, yd, kMaxAlgos, &n, perf));
  } else {
    LATHE_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn(), xd, wd, cd, yd, kMaxAlgos, &n, perf));
  }
  ConvAlgoChoice c = pick(perf, n, ctx, operands);
  if (c.algo < 0)
    return cache[key] = c;  // remembered: this format is not offered for this problem
  LATHE_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
      ctx.cudnn(), xd, wd, cd, yd, static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), &c.workspace_bytes));
  return cache[key] = c;
}

ConvAlgoChoice choose_backward_data(CudaContext& ctx, const std::vector<int64_t>& key, DType operands,
                                    const FilterDesc& wd, const TensorDesc& dyd, const ConvDesc& cd,
                                    const TensorDesc& dxd) {
  auto& cache = ctx.conv_algo_cache();
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  cudnnConvolutionBwdDataAlgoPerf_t perf[kMaxAlgos];
  int n = 0;
  if (ctx.benchmark_conv_algos()) {
    LATHE_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(ctx.cudnn(), wd, dyd, cd, dxd, kMaxAlgos, &n, perf));
  } else {
    LATHE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn(), wd, dyd, cd, dxd, kMaxAlgos, &n, perf));
  }
  ConvAlgoChoice c = pick(perf, n, ctx, operands);
  if (c.algo < 0)
    return cache[key] = c;  // remembered: this format is not offered for this problem
  LATHE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
      ctx.cudnn(), wd, dyd, cd, dxd, static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), &c.workspace_bytes));
  return cache[key] = c;
}

ConvAlgoChoice choose_backward_filter(CudaContext& ctx, const std::vector<int64_t>& key, DType operands,
                                      const TensorDesc& xd, const TensorDesc& dyd, const ConvDesc& cd,
                                      const FilterDesc& dwd) {
  auto& cache = ctx.conv_algo_cache();
  if (auto it = cache.find(key); it != cache.end())
    return it->second;
  cudnnConvolutionBwdFilterAlgoPerf_t perf[kMaxAlgos];
  int n = 0;
  if (ctx.benchmark_conv_algos()) {
    LATHE_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(ctx.cudnn(), xd, dyd, cd, dwd, kMaxAlgos, &n, perf));
  } else {
    LATHE_CUDNN_CHECK(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.cudnn(), xd, dyd, cd, dwd, kMaxAlgos, &n, perf));
  }
  ConvAlgoChoice c = pick(perf, n, ctx, operands);
  if (c.algo < 0)
    return cache[key] = c;  // remembered: this format is not offered for this problem
  LATHE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
      ctx.cudnn(), xd, dyd, cd, dwd, static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), &c.workspace_bytes));
  return cache[key] = c;
}

/// Per-channel sums of a 4-D tensor in `format` into `db` (the bias gradient).
void conv_bias_grad(CudaContext& ctx, const Tensor& dy, MemoryFormat format, Tensor& diff_bias) {
  check_f32(ctx, diff_bias, "conv2d_backward_weights diff_bias");
  LATHE_CHECK(diff_bias.ndim() == 1 && diff_bias.dim(0) == dy.dim(1), "conv2d_backward_weights: diff_bias ",
              diff_bias.describe(), " does not match ", dy.dim(1), " output channels");
  const int64_t N = dy.dim(0), C = dy.dim(1), HW = dy.dim(2) * dy.dim(3);
  const bool nhwc = format == MemoryFormat::channels_last;
  const int64_t outer = nhwc ? N * HW : N, inner = nhwc ? 1 : HW, row = nhwc ? C : C * HW;
  Tensor db = make_contiguous(ctx, diff_bias);
  void* scratch = ctx.scratch(kernels::channel_sums_scratch_bytes(outer, C, inner));
  LATHE_CUDA_CHECK(kernels::channel_sums(ctx.stream(), ptr<float>(dy), outer, C, inner, row, ptr<float>(db), scratch));
  copy_back(ctx, db, diff_bias);
}

}  // namespace

// ------------------------------------------------------------------ ops
namespace {

/// The formats to try: the preferred one, then NCHW (cuDNN's FP32 kernels cover NCHW most widely).
std::vector<MemoryFormat> formats_to_try(MemoryFormat preferred) {
  if (preferred == MemoryFormat::contiguous)
    return {MemoryFormat::contiguous};
  return {preferred, MemoryFormat::contiguous};
}

[[noreturn]] void no_algorithm(const CudaContext& ctx, const char* what, const Tensor& x, const Tensor& w) {
  LATHE_FAIL("cuDNN offers no usable ", what, " algorithm for src ", x.describe(), " weights ", w.describe(), " (TF32 ",
             ctx.allow_tf32() ? "allowed" : "off", ", workspace limit ", ctx.max_workspace_bytes() >> 20, " MiB)");
}

/// Where cuDNN writes an output of `operands`' dtype: `out` itself for f32, else a bf16/f16
/// tensor in `format` that widen_into() converts into `out` afterwards.
Tensor cudnn_output(CudaContext& ctx, const Tensor& out, DType operands, MemoryFormat format) {
  return is_half(operands) ? device_empty(ctx, out.shape(), operands, format) : out;
}

void widen_into(CudaContext& ctx, const Tensor& written, Tensor& out) {
  if (!written.same_memory(out))
    device_convert(ctx, written, out);
}

}  // namespace

void conv2d_forward(CudaContext& ctx, const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                    Tensor& dst, PostOp post) {
  // Shapes: the op contract, checked once by Backend::conv2d_forward (op_contract.h).
  check_matmul_operands(ctx, src, weights, dst, "conv2d_forward");
  Tensor b;
  if (bias)
    check_f32(ctx, *bias, "conv2d_forward bias");
  const StreamScope scope = ctx.activate();
  if (dst.numel() == 0)
    return;
  if (bias)
    b = make_contiguous(ctx, *bias);
  const DType dt = src.dtype();
  for (const MemoryFormat f : formats_to_try(activation_format(src, dst))) {
    const Tensor x = in_format(ctx, src, f), w = in_format(ctx, weights, f);
    Tensor y = output_in_format(ctx, dst, f);
    Tensor yc = cudnn_output(ctx, y, dt, f);
    const TensorDesc xd(x, f), yd(yc, f);
    const FilterDesc wd(w, f);
    const ConvDesc cd(p, math_type(ctx, dt));
    const ConvAlgoChoice c = choose_forward(ctx, problem_key(ConvKind::forward, p, x, w, f, ctx), dt, xd, wd, cd, yd);
    if (c.algo < 0)
      continue;
    const float one = 1.0f, zero = 0.0f;
    LATHE_CUDNN_CHECK(cudnnConvolutionForward(
        ctx.cudnn(), &one, xd, x.raw(), wd, w.raw(), cd, static_cast<cudnnConvolutionFwdAlgo_t>(c.algo),
        ctx.workspace(c.workspace_bytes), c.workspace_bytes, &zero, yd, yc.raw()));
    widen_into(ctx, yc, y);
    const int64_t N = y.dim(0), O = y.dim(1), HW = y.dim(2) * y.dim(3);
    const bool nhwc = f == MemoryFormat::channels_last;
    LATHE_CUDA_CHECK(kernels::bias_act(ctx.stream(), ptr<float>(y), nhwc ? N * HW : N, O, nhwc ? 1 : HW,
                                       nhwc ? O : O * HW, bias ? ptr<float>(b) : nullptr, post == PostOp::relu));
    copy_back(ctx, y, dst);
    return;
  }
  no_algorithm(ctx, "forward convolution", src, weights);
}

void conv2d_backward_data(CudaContext& ctx, const ConvParams& p, const Tensor& diff_dst, const Tensor& weights,
                          Tensor& diff_src) {
  check_matmul_operands(ctx, diff_dst, weights, diff_src, "conv2d_backward_data");
  // Shapes: the op contract, checked once by Backend::conv2d_backward_data (op_contract.h).
  const StreamScope scope = ctx.activate();
  if (diff_src.numel() == 0)
    return;
  const DType dt = diff_dst.dtype();
  for (const MemoryFormat f : formats_to_try(activation_format(diff_src, diff_dst))) {
    const Tensor dy = in_format(ctx, diff_dst, f), w = in_format(ctx, weights, f);
    Tensor dx = output_in_format(ctx, diff_src, f);
    Tensor dxc = cudnn_output(ctx, dx, dt, f);
    const TensorDesc dyd(dy, f), dxd(dxc, f);
    const FilterDesc wd(w, f);
    const ConvDesc cd(p, math_type(ctx, dt));
    const ConvAlgoChoice c =
        choose_backward_data(ctx, problem_key(ConvKind::backward_data, p, dxc, w, f, ctx), dt, wd, dyd, cd, dxd);
    if (c.algo < 0)
      continue;
    const float one = 1.0f, zero = 0.0f;
    LATHE_CUDNN_CHECK(cudnnConvolutionBackwardData(
        ctx.cudnn(), &one, wd, w.raw(), dyd, dy.raw(), cd, static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo),
        ctx.workspace(c.workspace_bytes), c.workspace_bytes, &zero, dxd, dxc.raw()));
    widen_into(ctx, dxc, dx);
    copy_back(ctx, dx, diff_src);
    return;
  }
  no_algorithm(ctx, "backward-data convolution", diff_src, weights);
}

void conv2d_backward_weights(CudaContext& ctx, const ConvParams& p, const Tensor& src, const Tensor& diff_dst,
                             Tensor& diff_weights, Tensor* diff_bias) {
  check_matmul_operands(ctx, src, diff_dst, diff_weights, "conv2d_backward_weights");
  // Shapes: the op contract, checked once by Backend::conv2d_backward_weights (op_contract.h).
  const StreamScope scope = ctx.activate();
  const DType dt = src.dtype();
  for (const MemoryFormat f : formats_to_try(activation_format(src, diff_dst))) {
    const Tensor x = in_format(ctx, src, f), dy = in_format(ctx, diff_dst, f);
    Tensor dw = output_in_format(ctx, diff_weights, f);
    if (dw.numel() > 0) {
      Tensor dwc = cudnn_output(ctx, dw, dt, f);
      const TensorDesc xd(x, f), dyd(dy, f);
      const FilterDesc dwd(dwc, f);
      const ConvDesc cd(p, math_type(ctx, dt));
      const ConvAlgoChoice c =
          choose_backward_filter(ctx, problem_key(ConvKind::backward_filter, p, x, dwc, f, ctx), dt, xd, dyd, cd, dwd);
      if (c.algo < 0)
        continue;
      const float one = 1.0f, zero = 0.0f;
      LATHE_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          ctx.cudnn(), &one, xd, x.raw(), dyd, dy.raw(), cd, static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo),
          ctx.workspace(c.workspace_bytes), c.workspace_bytes, &zero, dwd, dwc.raw()));
      widen_into(ctx, dwc, dw);
      copy_back(ctx, dw, diff_weights);
    }
    if (diff_bias) {
      Tensor dy32 = dy;
      if (is_half(dt)) {  // f32 sums of the bf16/f16 gradient
        dy32 = device_empty(ctx, dy.shape(), DType::f32, f);
        device_convert(ctx, dy, dy32);
      }
      conv_bias_grad(ctx, dy32, f, *diff_bias);
    }
    return;
  }
  no_algorithm(ctx, "backward-filter convolution", src, diff_weights);
}

}  // namespace lathe::cuda
