// Plain-loop implementations of every Backend op (f32 and f64), written to be obviously right.
#include "engine/backend/cpu/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "engine/core/rng.h"

namespace lathe {

namespace {

template <class T>
struct View4 {
  T* p;
  int64_t s0, s1, s2, s3;
  explicit View4(const Tensor& t)
      : p(static_cast<T*>(t.raw())), s0(t.stride(0)), s1(t.stride(1)), s2(t.stride(2)), s3(t.stride(3)) {}
  T& operator()(int64_t n, int64_t c, int64_t h, int64_t w) const { return p[n * s0 + c * s1 + h * s2 + w * s3]; }
};

template <class T>
struct View2 {
  T* p;
  int64_t s0, s1;
  explicit View2(const Tensor& t) : p(static_cast<T*>(t.raw())), s0(t.stride(0)), s1(t.stride(1)) {}
  T& operator()(int64_t i, int64_t j) const { return p[i * s0 + j * s1]; }
};

void check_float(const Tensor& t, const char* what) {
  LATHE_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, what, ": reference backend runs f32 and f64, got ",
              t.describe());
  LATHE_CHECK(t.device().is_cpu(), what, ": reference backend needs host tensors, got ", t.describe());
}

bool is_low_precision(DType dt) { return dt == DType::bf16 || dt == DType::f16; }

/// An f32 host copy of a bf16/f16 operand (same layout); mixed-precision ops take low-precision
/// src/weights/diff_dst with f32 outputs and accumulate in f32, so the reference widens them first.
Tensor widened(const Tensor& t) {
  if (!is_low_precision(t.dtype()))
    return t;
  Tensor out = Tensor::empty(t.shape(), DType::f32, Device::cpu(), t.format());
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    out.set_flat(i, t.at_flat(i));
  return out;
}

void check_f32_output(const Tensor& t, const char* what) {
  LATHE_CHECK(t.dtype() == DType::f32, what, ": with bf16/f16 operands the output must be f32, got ", t.describe());
}

template <class F>
void dispatch(DType dt, F&& f) {
  if (dt == DType::f32) {
    f(float{});
  } else if (dt == DType::f64) {
    f(double{});
  } else {
    LATHE_FAIL("reference backend: unsupported dtype ", dtype_name(dt));
  }
}

/// Applies f(dst_i, src_i...) over tensors of one shape; flat when they share dense strides.
template <class T, class F>
void map2(const Tensor& a, Tensor& dst, F&& f) {
  const int64_t n = a.numel();
  if (a.strides() == dst.strides() && a.is_dense()) {
    const T* pa = static_cast<const T*>(a.raw());
    T* pd = static_cast<T*>(dst.raw());
    for (int64_t i = 0; i < n; ++i)
      pd[i] = f(pa[i], pd[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    dst.set_flat(i, f(static_cast<T>(a.at_flat(i)), static_cast<T>(dst.at_flat(i))));
}

template <class T, class F>
void map3(const Tensor& a, const Tensor& b, Tensor& dst, F&& f) {
  const int64_t n = a.numel();
  if (a.strides() == dst.strides() && b.strides() == dst.strides() && a.is_dense()) {
    const T* pa = static_cast<const T*>(a.raw());
    const T* pb = static_cast<const T*>(b.raw());
    T* pd = static_cast<T*>(dst.raw());
    for (int64_t i = 0; i < n; ++i)
      pd[i] = f(pa[i], pb[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    dst.set_flat(i, f(static_cast<T>(a.at_flat(i)), static_cast<T>(b.at_flat(i))));
}

}  // namespace

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos)
        return line.substr(pos + 2);
    }
  }
  return "unknown CPU";
}

bool ReferenceBackend::supports(Op op, DType dtype) const {
  // The 8-bit implementation list: INT8 linear/conv2d (keyed by src dtype), integer pooling and
  // ReLU, (de)quantization; reference_compressed.cpp. sparse_matmul runs at f32 only.
  if (dtype == DType::s8 || dtype == DType::u8)
    return op == Op::linear || op == Op::conv2d || op == Op::maxpool2d || op == Op::relu || op == Op::quantize ||
           op == Op::dequantize;
  if (op == Op::sparse_matmul)
    return dtype == DType::f32;
  if (op == Op::quantize || op == Op::dequantize)
    return false;  // keyed by the 8-bit side
  return dtype == DType::f32 || dtype == DType::f64;
}

std::string ReferenceBackend::device_name() const { return cpu_model_name(); }

void ReferenceBackend::fill_zero(Tensor& t) {
  LATHE_CHECK(t.device().is_cpu(), "fill_zero: host tensor expected");
  if (t.is_dense()) {
    std::memset(t.raw(), 0, t.nbytes());
  } else {
    t.fill(0);
  }
}

void ReferenceBackend::copy_impl(const Tensor& src, Tensor& dst) { src.copy_to(dst); }

void ReferenceBackend::reorder_impl(const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i)
    dst.set_flat(i, src.at_flat(i));
}

void ReferenceBackend::round_to_precision(const Tensor& src, Tensor& dst, DType precision) {
  LATHE_CHECK(precision == DType::bf16 || precision == DType::f16,
              "round_to_precision: precision must be bf16 or f16, got ", dtype_name(precision));
  LATHE_CHECK(src.dtype() == DType::f32 && dst.dtype() == DType::f32 && src.shape() == dst.shape(),
              "round_to_precision: f32 tensors of one shape expected, got ", src.describe(), " -> ", dst.describe());
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(src.at_flat(i));
    dst.set_flat(i, precision == DType::bf16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x)));
  }
}

// ---------------------------------------------------------------- linear
void ReferenceBackend::linear_forward_impl(const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                                           PostOp post) {
  if (is_low_precision(src.dtype()) || is_low_precision(weights.dtype())) {
    check_f32_output(dst, "linear_forward");
    return ReferenceBackend::linear_forward_impl(widened(src), widened(weights), bias, dst, post);
  }
  check_float(src, "linear_forward");  // shapes: the contract, checked once by Backend::linear_forward
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View2<T> x(src), w(weights), y(dst);
    const int64_t N = src.dim(0), K = src.dim(1), O = weights.dim(0);
    const T* b = bias ? static_cast<const T*>(bias->raw()) : nullptr;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o) {
        T acc = b ? b[o * bias->stride(0)] : T(0);
        for (int64_t k = 0; k < K; ++k)
          acc += x(n, k) * w(o, k);
        if (post == PostOp::relu && acc < T(0))
          acc = T(0);
        y(n, o) = acc;
      }
  });
}

void ReferenceBackend::linear_backward_data_impl(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) {
  if (is_low_precision(diff_dst.dtype()) || is_low_precision(weights.dtype())) {
    check_f32_output(diff_src, "linear_backward_data");
    return ReferenceBackend::linear_backward_data_impl(widened(diff_dst), widened(weights), diff_src);
  }
  check_float(diff_dst, "linear_backward_data");
  dispatch(diff_dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View2<T> dy(diff_dst), w(weights), dx(diff_src);
    const int64_t N = diff_dst.dim(0), O = weights.dim(0), K = weights.dim(1);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        T acc = 0;
        for (int64_t o = 0; o < O; ++o)
          acc += dy(n, o) * w(o, k);
        dx(n, k) = acc;
      }
  });
}

void ReferenceBackend::linear_backward_weights_impl(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                                                    Tensor* diff_bias) {
  if (is_low_precision(src.dtype()) || is_low_precision(diff_dst.dtype())) {
    check_f32_output(diff_weights, "linear_backward_weights");
    return ReferenceBackend::linear_backward_weights_impl(widened(src), widened(diff_dst), diff_weights, diff_bias);
  }
  check_float(src, "linear_backward_weights");
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View2<T> x(src), dy(diff_dst), dw(diff_weights);
    const int64_t N = src.dim(0), K = src.dim(1), O = diff_dst.dim(1);
    for (int64_t o = 0; o < O; ++o)
      for (int64_t k = 0; k < K; ++k) {
        T acc = 0;
        for (int64_t n = 0; n < N; ++n)
          acc += dy(n, o) * x(n, k);
        dw(o, k) = acc;
      }
    if (diff_bias) {
      T* db = static_cast<T*>(diff_bias->raw());
      for (int64_t o = 0; o < O; ++o) {
        T acc = 0;
        for (int64_t n = 0; n < N; ++n)
          acc += dy(n, o);
        db[o * diff_bias->stride(0)] = acc;
      }
    }
  });
}

// ---------------------------------------------------------------- conv2d
namespace {}  // namespace

void ReferenceBackend::conv2d_forward_impl(const ConvParams& p, const Tensor& src, const Tensor& weights,
                                           const Tensor* bias, Tensor& dst, PostOp post) {
  if (is_low_precision(src.dtype()) || is_low_precision(weights.dtype())) {
    check_f32_output(dst, "conv2d_forward");
    return ReferenceBackend::conv2d_forward_impl(p, widened(src), widened(weights), bias, dst, post);
  }
  check_float(src, "conv2d_forward");  // shapes: the contract, checked once by Backend::conv2d_forward
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View4<T> x(src), w(weights), y(dst);
    const int64_t N = src.dim(0), C = src.dim(1), H = src.dim(2), W = src.dim(3);
    const int64_t O = weights.dim(0), KH = weights.dim(2), KW = weights.dim(3), OH = dst.dim(2), OW = dst.dim(3);
    const T* b = bias ? static_cast<const T*>(bias->raw()) : nullptr;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            T acc = b ? b[o * bias->stride(0)] : T(0);
            for (int64_t c = 0; c < C; ++c)
              for (int64_t kh = 0; kh < KH; ++kh) {
                const int64_t ih = oh * p.stride_h - p.pad_h + kh;
                if (ih < 0 || ih >= H)
                  continue;
                for (int64_t kw = 0; kw < KW; ++kw) {
                  const int64_t iw = ow * p.stride_w - p.pad_w + kw;
                  if (iw < 0 || iw >= W)
                    continue;
                  acc += x(n, c, ih, iw) * w(o, c, kh, kw);
                }
              }
            if (post == PostOp::relu && acc < T(0))
              acc = T(0);
            y(n, o, oh, ow) = acc;
          }
  });
}

void ReferenceBackend::conv2d_backward_data_impl(const ConvParams& p, const Tensor& diff_dst, const Tensor& weights,
                                                 Tensor& diff_src) {
  if (is_low_precision(diff_dst.dtype()) || is_low_precision(weights.dtype())) {
    check_f32_output(diff_src, "conv2d_backward_data");
    return ReferenceBackend::conv2d_backward_data_impl(p, widened(diff_dst), widened(weights), diff_src);
  }
  check_float(diff_dst, "conv2d_backward_data");
  fill_zero(diff_src);
  dispatch(diff_dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View4<T> dy(diff_dst), w(weights), dx(diff_src);
    const int64_t N = diff_src.dim(0), C = diff_src.dim(1), H = diff_src.dim(2), W = diff_src.dim(3);
    const int64_t O = weights.dim(0), KH = weights.dim(2), KW = weights.dim(3);
    const int64_t OH = diff_dst.dim(2), OW = diff_dst.dim(3);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const T g = dy(n, o, oh, ow);
            for (int64_t c = 0; c < C; ++c)
              for (int64_t kh = 0; kh < KH; ++kh) {
                const int64_t ih = oh * p.stride_h - p.pad_h + kh;
                if (ih < 0 || ih >= H)
                  continue;
                for (int64_t kw = 0; kw < KW; ++kw) {
                  const int64_t iw = ow * p.stride_w - p.pad_w + kw;
                  if (iw < 0 || iw >= W)
                    continue;
                  dx(n, c, ih, iw) += g * w(o, c, kh, kw);
                }
              }
          }
  });
}

void ReferenceBackend::conv2d_backward_weights_impl(const ConvParams& p, const Tensor& src, const Tensor& diff_dst,
                                                    Tensor& diff_weights, Tensor* diff_bias) {
  if (is_low_precision(src.dtype()) || is_low_precision(diff_dst.dtype())) {
    check_f32_output(diff_weights, "conv2d_backward_weights");
    return ReferenceBackend::conv2d_backward_weights_impl(p, widened(src), widened(diff_dst), diff_weights, diff_bias);
  }
  check_float(src, "conv2d_backward_weights");
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View4<T> x(src), dy(diff_dst), dw(diff_weights);
    const int64_t N = src.dim(0), C = src.dim(1), H = src.dim(2), W = src.dim(3);
    const int64_t O = diff_weights.dim(0), KH = diff_weights.dim(2), KW = diff_weights.dim(3);
    const int64_t OH = diff_dst.dim(2), OW = diff_dst.dim(3);
    for (int64_t o = 0; o < O; ++o)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t kw = 0; kw < KW; ++kw) {
            T acc = 0;
            for (int64_t n = 0; n < N; ++n)
              for (int64_t oh = 0; oh < OH; ++oh) {
                const int64_t ih = oh * p.stride_h - p.pad_h + kh;
                if (ih < 0 || ih >= H)
                  continue;
                for (int64_t ow = 0; ow < OW; ++ow) {
                  const int64_t iw = ow * p.stride_w - p.pad_w + kw;
                  if (iw < 0 || iw >= W)
                    continue;
                  acc += dy(n, o, oh, ow) * x(n, c, ih, iw);
                }
              }
            dw(o, c, kh, kw) = acc;
          }
    if (diff_bias) {
      T* db = static_cast<T*>(diff_bias->raw());
      for (int64_t o = 0; o < O; ++o) {
        T acc = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow)
              acc += dy(n, o, oh, ow);
        db[o * diff_bias->stride(0)] = acc;
      }
    }
  });
}

// ---------------------------------------------------------------- maxpool2d
void ReferenceBackend::maxpool2d_forward_impl(const PoolParams& p, const Tensor& src, Tensor& dst, Tensor& workspace) {
  check_float(src, "maxpool2d_forward");
  const int64_t N = src.dim(0), C = src.dim(1), H = src.dim(2), W = src.dim(3);
  const int64_t OH = conv_out_size(H, p.kernel_h, p.stride_h, p.pad_h);
  const int64_t OW = conv_out_size(W, p.kernel_w, p.stride_w, p.pad_w);
  if (!workspace.defined() || workspace.shape() != dst.shape() || workspace.dtype() != DType::s32)
    workspace = Tensor::empty(dst.shape(), DType::s32);
  int32_t* argmax = workspace.data<int32_t>();  // flat h*W + w of the max within its (n, c) plane
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View4<T> x(src), y(dst);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            T best = -std::numeric_limits<T>::infinity();
            int32_t where = -1;
            for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
              const int64_t ih = oh * p.stride_h - p.pad_h + kh;
              if (ih < 0 || ih >= H)
                continue;
              for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
                const int64_t iw = ow * p.stride_w - p.pad_w + kw;
                if (iw < 0 || iw >= W)
                  continue;
                const T v = x(n, c, ih, iw);
                if (where < 0 || v > best) {  // first maximum wins, as in PyTorch
                  best = v;
                  where = static_cast<int32_t>(ih * W + iw);
                }
              }
            }
            y(n, c, oh, ow) = best;
            argmax[((n * C + c) * OH + oh) * OW + ow] = where;
          }
  });
}

void ReferenceBackend::maxpool2d_backward_impl(const PoolParams& p, const Tensor& diff_dst, const Tensor& workspace,
                                               Tensor& diff_src) {
  check_float(diff_dst, "maxpool2d_backward");
  LATHE_CHECK(workspace.dtype() == DType::s32 && workspace.shape() == diff_dst.shape(),
              "maxpool2d_backward: workspace does not come from maxpool2d_forward of this backend");
  fill_zero(diff_src);
  const int64_t N = diff_src.dim(0), C = diff_src.dim(1), W = diff_src.dim(3);
  const int64_t OH = diff_dst.dim(2), OW = diff_dst.dim(3);
  const int32_t* argmax = workspace.data<int32_t>();
  dispatch(diff_dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View4<T> dy(diff_dst), dx(diff_src);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int32_t where = argmax[((n * C + c) * OH + oh) * OW + ow];
            dx(n, c, where / W, where % W) += dy(n, c, oh, ow);
          }
  });
}

// ---------------------------------------------------------------- elementwise
void ReferenceBackend::relu_forward_impl(const Tensor& src, Tensor& dst) {
  check_float(src, "relu_forward");
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    map2<T>(src, dst, [](T x, T) { return x > T(0) ? x : T(0); });
  });
}

void ReferenceBackend::relu_backward_impl(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) {
  check_float(dst, "relu_backward");
  dispatch(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    map3<T>(dst, diff_dst, diff_src, [](T y, T g) { return y > T(0) ? g : T(0); });
  });
}

void ReferenceBackend::add_impl(const Tensor& a, const Tensor& b, Tensor& dst) {
  check_float(a, "add");
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    map3<T>(a, b, dst, [](T x, T y) { return x + y; });
  });
}

void ReferenceBackend::axpy_impl(double alpha, const Tensor& src, Tensor& dst) {
  check_float(src, "axpy");
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T a = static_cast<T>(alpha);
    map2<T>(src, dst, [a](T x, T d) { return d + a * x; });
  });
}

void ReferenceBackend::scale_impl(Tensor& t, double alpha) {
  check_float(t, "scale");
  dispatch(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T a = static_cast<T>(alpha);
    map2<T>(t, t, [a](T x, T) { return a * x; });
  });
}

// ---------------------------------------------------------------- batchnorm (over N, H, W per channel)
void ReferenceBackend::batchnorm_forward_training_impl(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                                       const Tensor& beta, Tensor& dst, Tensor& save_mean,
                                                       Tensor& save_invstd, Tensor& running_mean, Tensor& running_var) {
  check_float(src, "batchnorm_forward_training");
  const int64_t N = src.dim(0), C = src.dim(1), H = src.dim(2), W = src.dim(3);
  const double count = static_cast<double>(N * H * W);
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View4<T> x(src), y(dst);
    for (int64_t c = 0; c < C; ++c) {
      double mean = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w)
            mean += x(n, c, h, w);
      mean /= count;
      double var = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w)
            var += (x(n, c, h, w) - mean) * (x(n, c, h, w) - mean);
      var /= count;  // biased, for normalisation
      const double invstd = 1.0 / std::sqrt(var + p.eps);
      const double g = gamma.get({c}), b = beta.get({c});
      for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w)
            y(n, c, h, w) = static_cast<T>((x(n, c, h, w) - mean) * invstd * g + b);
      save_mean.set({c}, mean);
      save_invstd.set({c}, invstd);
      const double unbiased = count > 1 ? var * count / (count - 1) : var;
      running_mean.set({c}, (1 - p.momentum) * running_mean.get({c}) + p.momentum * mean);
      running_var.set({c}, (1 - p.momentum) * running_var.get({c}) + p.momentum * unbiased);
    }
  });
}

void ReferenceBackend::batchnorm_forward_inference_impl(const BatchNormParams& p, const Tensor& src,
                                                        const Tensor& gamma, const Tensor& beta,
                                                        const Tensor& running_mean, const Tensor& running_var,
                                                        Tensor& dst) {
  check_float(src, "batchnorm_forward_inference");
  const int64_t N = src.dim(0), C = src.dim(1), H = src.dim(2), W = src.dim(3);
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View4<T> x(src), y(dst);
    for (int64_t c = 0; c < C; ++c) {
      const double invstd = 1.0 / std::sqrt(running_var.get({c}) + p.eps);
      const double mean = running_mean.get({c}), g = gamma.get({c}), b = beta.get({c});
      for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w)
            y(n, c, h, w) = static_cast<T>((x(n, c, h, w) - mean) * invstd * g + b);
    }
  });
}

void ReferenceBackend::batchnorm_backward_impl(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma,
                                               const Tensor& save_mean, const Tensor& save_invstd, Tensor& diff_src,
                                               Tensor& diff_gamma, Tensor& diff_beta) {
  check_float(src, "batchnorm_backward");
  const int64_t N = src.dim(0), C = src.dim(1), H = src.dim(2), W = src.dim(3);
  const double count = static_cast<double>(N * H * W);
  dispatch(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View4<T> x(src), dy(diff_dst), dx(diff_src);
    for (int64_t c = 0; c < C; ++c) {
      const double mean = save_mean.get({c}), invstd = save_invstd.get({c}), g = gamma.get({c});
      double sum_dy = 0, sum_dy_xhat = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            const double xhat = (x(n, c, h, w) - mean) * invstd;
            sum_dy += dy(n, c, h, w);
            sum_dy_xhat += dy(n, c, h, w) * xhat;
          }
      diff_gamma.set({c}, sum_dy_xhat);
      diff_beta.set({c}, sum_dy);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            const double xhat = (x(n, c, h, w) - mean) * invstd;
            dx(n, c, h, w) =
                static_cast<T>(g * invstd * (dy(n, c, h, w) - sum_dy / count - xhat * sum_dy_xhat / count));
          }
    }
  });
}

// ---------------------------------------------------------------- dropout
void ReferenceBackend::dropout_forward_impl(double p, uint64_t seed, const Tensor& src, Tensor& dst, Tensor& mask) {
  check_float(src, "dropout_forward");
  if (!mask.defined() || mask.shape() != src.shape() || mask.dtype() != DType::u8)
    mask = Tensor::empty(src.shape(), DType::u8);
  Rng rng(seed);
  const int64_t n = src.numel();
  const double keep_scale = 1.0 / (1.0 - p);
  uint8_t* m = mask.data<uint8_t>();
  if (src.dtype() == DType::f32 && dst.dtype() == DType::f32 && src.is_contiguous() && dst.is_contiguous()) {
    // The cpu backend's dropout too, at every training step: pointers instead of at_flat/set_flat
    // per element (the same draws in the same order, the same double product rounded to f32).
    const float* x = src.data<float>();
    float* y = dst.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      m[i] = rng.uniform() >= p ? 1 : 0;
      y[i] = m[i] ? static_cast<float>(static_cast<double>(x[i]) * keep_scale) : 0.0f;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    m[i] = rng.uniform() >= p ? 1 : 0;
    dst.set_flat(i, m[i] ? src.at_flat(i) * keep_scale : 0.0);
  }
}

void ReferenceBackend::dropout_backward_impl(double p, const Tensor& diff_dst, const Tensor& mask, Tensor& diff_src) {
  check_float(diff_dst, "dropout_backward");
  const int64_t n = diff_dst.numel();
  const double keep_scale = 1.0 / (1.0 - p);
  const uint8_t* m = mask.data<uint8_t>();
  if (diff_dst.dtype() == DType::f32 && diff_src.dtype() == DType::f32 && diff_dst.is_contiguous() &&
      diff_src.is_contiguous()) {
    const float* dy = diff_dst.data<float>();
    float* dx = diff_src.data<float>();
    for (int64_t i = 0; i < n; ++i)
      dx[i] = m[i] ? static_cast<float>(static_cast<double>(dy[i]) * keep_scale) : 0.0f;
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    diff_src.set_flat(i, m[i] ? diff_dst.at_flat(i) * keep_scale : 0.0);
}

// ---------------------------------------------------------------- loss
LossResult ReferenceBackend::softmax_cross_entropy_impl(const Tensor& logits, const Tensor& labels, Tensor* diff_logits,
                                                        double grad_scale) {
  check_float(logits, "softmax_cross_entropy");
  LossResult r;
  const int64_t N = logits.dim(0), C = logits.dim(1);
  const int32_t* y = labels.data<int32_t>();
  dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    View2<T> z(logits);
    for (int64_t n = 0; n < N; ++n) {
      LATHE_CHECK(y[n] >= 0 && y[n] < C, "label ", y[n], " out of range [0, ", C, ")");
      double mx = z(n, 0);
      int64_t arg = 0;
      for (int64_t c = 1; c < C; ++c)
        if (z(n, c) > mx) {
          mx = z(n, c);
          arg = c;
        }
      double se = 0;
      for (int64_t c = 0; c < C; ++c)
        se += std::exp(static_cast<double>(z(n, c)) - mx);
      const double lse = mx + std::log(se);
      r.loss_sum += lse - z(n, y[n]);
      r.correct += arg == y[n];
      if (diff_logits) {
        View2<T> g(*diff_logits);
        for (int64_t c = 0; c < C; ++c) {
          const double pr = std::exp(static_cast<double>(z(n, c)) - lse);
          g(n, c) = static_cast<T>(grad_scale * (pr - (c == y[n] ? 1.0 : 0.0)));
        }
      }
    }
  });
  return r;
}

// ---------------------------------------------------------------- optimizers
void ReferenceBackend::sgd_update_impl(const SgdParams& p, Tensor& param, const Tensor& grad, Tensor& momentum_buf) {
  check_float(param, "sgd_update");
  dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* w = static_cast<T*>(param.raw());
    const T* g = static_cast<const T*>(grad.raw());
    T* buf = p.momentum != 0 ? static_cast<T*>(momentum_buf.raw()) : nullptr;
    const int64_t n = param.numel();
    const T lr = static_cast<T>(p.lr), mu = static_cast<T>(p.momentum), wd = static_cast<T>(p.weight_decay);
    for (int64_t i = 0; i < n; ++i) {
      T d = g[i] + wd * w[i];
      if (buf) {
        buf[i] = mu * buf[i] + d;  // PyTorch: buf = mu*buf + d (no dampening)
        d = p.nesterov ? d + mu * buf[i] : buf[i];
      }
      w[i] -= lr * d;
    }
  });
}

void ReferenceBackend::adamw_update_impl(const AdamWParams& p, Tensor& param, const Tensor& grad, Tensor& m,
                                         Tensor& v) {
  check_float(param, "adamw_update");
  dispatch(param.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* w = static_cast<T*>(param.raw());
    const T* g = static_cast<const T*>(grad.raw());
    T* mm = static_cast<T*>(m.raw());
    T* vv = static_cast<T*>(v.raw());
    const int64_t n = param.numel();
    const double bc1 = 1.0 - std::pow(p.beta1, static_cast<double>(p.step));
    const double bc2 = 1.0 - std::pow(p.beta2, static_cast<double>(p.step));
    for (int64_t i = 0; i < n; ++i) {
      w[i] = static_cast<T>(w[i] * (1.0 - p.lr * p.weight_decay));
      mm[i] = static_cast<T>(p.beta1 * mm[i] + (1 - p.beta1) * g[i]);
      vv[i] = static_cast<T>(p.beta2 * vv[i] + (1 - p.beta2) * g[i] * g[i]);
      const double mhat = mm[i] / bc1, vhat = vv[i] / bc2;
      w[i] = static_cast<T>(w[i] - p.lr * mhat / (std::sqrt(vhat) + p.eps));
    }
  });
}

double ReferenceBackend::sum_impl(const Tensor& t) {
  double s = 0;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    s += t.at_flat(i);
  return s;
}

double ReferenceBackend::sum_squares_impl(const Tensor& t) {
  double s = 0;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    s += t.at_flat(i) * t.at_flat(i);
  return s;
}

}  // namespace lathe
