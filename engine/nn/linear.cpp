// Linear: shapes, PyTorch's initialisation; the matmuls run in MatmulLayer.
#include "engine/nn/linear.h"

#include <cmath>

namespace lathe {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : MatmulLayer(Op::linear, bias), m_in(in_features), m_out(out_features) {
  LATHE_CHECK(in_features > 0 && out_features > 0, "linear needs positive sizes, got ", in_features, " -> ",
              out_features);
}

std::string Linear::describe() const {
  return "linear(" + std::to_string(m_in) + " -> " + std::to_string(m_out) + (has_bias() ? "" : ", no bias") + ")";
}

Shape Linear::output_shape(const std::vector<Shape>& inputs) const {
  const Shape& in = inputs.at(0);
  if (in.size() != 2 || in[1] != m_in)
    throw ConfigError(describe() + " expects input [N, " + std::to_string(m_in) + "], got " + shape_str(in) +
                      (in.size() == 4 ? " (add a flatten layer before it)" : ""));
  return {in[0], m_out};
}

void Linear::create_params(Backend& backend, DType dtype, Rng& rng) {
  // PyTorch: kaiming_uniform(a = sqrt(5)) gives bound 1/sqrt(fan_in) for the weight; the bias too.
  const double bound = 1.0 / std::sqrt(static_cast<double>(m_in));
  m_weight = make_param(backend, "weight", {m_out, m_in}, dtype);
  init_uniform(backend, m_weight.value, bound, rng);
  if (has_bias()) {
    m_bias = make_param(backend, "bias", {m_out}, dtype);
    init_uniform(backend, m_bias.value, bound, rng);
  }
}

}  // namespace lathe
