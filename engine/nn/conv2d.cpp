// Conv2d: shapes, PyTorch's initialisation; the convolutions run in MatmulLayer.
#include "engine/nn/conv2d.h"

#include <cmath>

namespace lathe {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding, bool bias)
    : MatmulLayer(Op::conv2d, bias),
      m_in(in_channels),
      m_out(out_channels),
      m_kernel(kernel),
      m_p{stride, stride, padding, padding} {
  LATHE_CHECK(in_channels > 0 && out_channels > 0 && kernel > 0 && stride > 0 && padding >= 0,
              "conv2d: channels, kernel and stride must be positive and padding >= 0");
}

std::string Conv2d::describe() const {
  return "conv2d(" + std::to_string(m_in) + " -> " + std::to_string(m_out) + ", k" + std::to_string(m_kernel) + " s" +
         std::to_string(m_p.stride_h) + " p" + std::to_string(m_p.pad_h) + ")";
}

Shape Conv2d::output_shape(const std::vector<Shape>& inputs) const {
  const Shape& in = inputs.at(0);
  if (in.size() != 4 || in[1] != m_in)
    throw ConfigError(describe() + " expects input [N, " + std::to_string(m_in) + ", H, W], got " + shape_str(in));
  return {in[0], m_out, conv_out_size(in[2], m_kernel, m_p.stride_h, m_p.pad_h),
          conv_out_size(in[3], m_kernel, m_p.stride_w, m_p.pad_w)};
}

void Conv2d::create_params(Backend& backend, DType dtype, Rng& rng) {
  const double fan_in = static_cast<double>(m_in * m_kernel * m_kernel);
  const double bound = 1.0 / std::sqrt(fan_in);  // kaiming_uniform(a = sqrt(5)), as PyTorch
  m_weight = make_param(backend, "weight", {m_out, m_in, m_kernel, m_kernel}, dtype);
  init_uniform(backend, m_weight.value, bound, rng);
  if (has_bias()) {
    m_bias = make_param(backend, "bias", {m_out}, dtype);
    init_uniform(backend, m_bias.value, bound, rng);
  }
}

int64_t Conv2d::flops_per_sample(const std::vector<Shape>& inputs) const {
  const Shape out = output_shape(inputs);
  return 2 * m_in * m_kernel * m_kernel * m_out * out[2] * out[3];
}

}  // namespace lathe
