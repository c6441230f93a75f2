// Fake quantization and its straight-through estimator (see fake_quant.h).
#include "engine/compress/quant/fake_quant.h"

#include "engine/backend/cpu/quantize_kernels.h"
#include "engine/compress/quant/int8_layer.h"

namespace lathe {

namespace {

void check_host_dense(const Tensor& t, const char* what) {
  LATHE_CHECK(t.device().is_cpu() && t.dtype() == DType::f32 && t.is_dense(), "fake quantization: ", what,
              " must be a dense host f32 tensor, got ", t.describe());
}

void check_per_tensor(const QuantParams& p) {
  LATHE_CHECK(!p.per_channel() && p.scale.size() == 1, "fake quantization: activation parameters must be per tensor, ",
              "got ", p.describe());
}

}  // namespace

void fake_quantize(const Tensor& src, const QuantParams& p, Tensor& dst) {
  check_host_dense(src, "input");
  p.validate();
  if (!dst.defined() || dst.shape() != src.shape() || dst.strides() != src.strides() || dst.dtype() != DType::f32 ||
      !dst.device().is_cpu())
    dst = Tensor::empty(src.shape(), DType::f32, Device::cpu(), src.format());
  const float* x = src.data<float>();
  float* y = dst.data<float>();
  // The work of every QAT forward (each fake-quantized layer's input and weights): parallel and
  // vectorised, bit-exact with dequantize_value(quantize_value(...)) (quantize_kernels.h).
  if (!p.per_channel()) {
    cpu::fake_quantize_blocks(x, y, 1, src.numel(), p.scale.data(), p.zero_point.data(), p.qmin(), p.qmax());
    return;
  }
  // Per channel along axis 0 of a contiguous tensor (weights [O, ...]): channel c is one block.
  LATHE_CHECK(p.axis == 0 && src.is_contiguous() && src.ndim() >= 1 && p.channels() == src.dim(0),
              "fake quantization: per-channel parameters need a contiguous [O, ...] tensor with O = ", p.channels(),
              " along axis 0, got ", src.describe(), " with axis ", p.axis);
  const int64_t O = src.dim(0), inner = src.numel() / std::max<int64_t>(O, 1);
  cpu::fake_quantize_blocks(x, y, O, inner, p.scale.data(), p.zero_point.data(), p.qmin(), p.qmax());
}

Tensor fake_quantize(const Tensor& src, const QuantParams& params) {
  Tensor dst;
  fake_quantize(src, params, dst);
  return dst;
}

void fake_quantize_ste_mask(const Tensor& src, const QuantParams& p, Tensor& grad) {
  check_host_dense(src, "input");
  check_host_dense(grad, "gradient");
  check_per_tensor(p);
  LATHE_CHECK(grad.shape() == src.shape() && grad.strides() == src.strides(), "fake quantization: gradient ",
              grad.describe(), " does not match the input ", src.describe());
  const float* x = src.data<float>();
  float* g = grad.data<float>();
  const double inv = 1.0 / static_cast<double>(p.scale[0]);
  const int32_t z = p.zero_point[0], qmin = p.qmin(), qmax = p.qmax();
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double q = std::nearbyint(static_cast<double>(x[i]) * inv) + z;
    if (!(q >= qmin && q <= qmax))
      g[i] = 0.0f;
  }
}

FakeQuantOperands::FakeQuantOperands(QuantParams input, int weight_bits, bool per_channel_weights)
    : m_input(std::move(input)), m_weight_bits(weight_bits), m_per_channel(per_channel_weights) {
  check_per_tensor(m_input);
  m_input.validate();
  LATHE_CHECK(weight_bits >= 2 && weight_bits <= 8, "fake quantization: weight bits must be 2..8, got ", weight_bits);
}

const Tensor& FakeQuantOperands::input(Backend&, const Tensor& src, Tensor& buf) {
  fake_quantize(src, m_input, buf);
  return buf;
}

const Tensor& FakeQuantOperands::weights(Backend&, const Tensor& w, Tensor& buf) {
  const Tensor dense = w.is_contiguous() ? w : w.contiguous_copy();
  fake_quantize(dense, int8_weight_params(dense, m_weight_bits, m_per_channel), buf);
  return buf;
}

void FakeQuantOperands::input_grad(Backend&, const Tensor& src, Tensor& diff_src) {
  fake_quantize_ste_mask(src, m_input, diff_src);
}

}  // namespace lathe
