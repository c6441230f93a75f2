// Weight quantization and scale folding for INT8 layers (the arithmetic is in int8_layer.h).
#include "engine/compress/quant/int8_layer.h"

#include "engine/compress/quant/observer.h"

namespace lathe {

QuantParams int8_weight_params(const Tensor& w, int bits, bool per_channel) {
  const int64_t O = w.dim(0);
  if (per_channel) {
    MinMaxObserver obs(0);
    obs.observe(w);
    return obs.params(bits, true, true);
  }
  MinMaxObserver obs(-1);  // one range, repeated per channel so the arithmetic stays the same
  obs.observe(w);
  return make_quant_params_per_channel(std::vector<double>(O, obs.min()[0]), std::vector<double>(O, obs.max()[0]), 0,
                                       bits, true, true);
}

Int8LayerData make_int8_layer(const Tensor& weights, const Tensor* bias, const Int8LayerConfig& config) {
  LATHE_CHECK(
      weights.dtype() == DType::f32 && weights.device().is_cpu() && (weights.ndim() == 2 || weights.ndim() == 4),
      "INT8 layer weights must be host f32 [O, K] or [O, C, KH, KW], got ", weights.describe());
  config.src.validate();
  LATHE_CHECK(!config.src.per_channel(), "INT8 layer src must be quantized per tensor, got ", config.src.describe());
  LATHE_CHECK(config.src.bits == 8, "INT8 layer src must use 8 bits, got ", config.src.describe());
  if (config.dst) {
    config.dst->validate();
    LATHE_CHECK(!config.dst->per_channel() && config.dst->bits == 8, "INT8 layer dst must be 8-bit per tensor, got ",
                config.dst->describe());
  }
  const int64_t O = weights.dim(0);
  if (bias)
    LATHE_CHECK(bias->dtype() == DType::f32 && bias->ndim() == 1 && bias->dim(0) == O, "INT8 layer bias must be f32 [",
                O, "], got ", bias->describe());

  Int8LayerData d;
  d.config = config;
  const Tensor w = weights.is_contiguous() ? weights : weights.contiguous_copy();
  const int bits = effective_weight_bits(config.weight_bits, config.weight_range);
  d.weights = int8_weight_params(w, bits, config.per_channel_weights);
  d.weights_q = quantize(w, d.weights);
  d.has_bias = bias != nullptr;
  d.bias_acc.assign(O, 0.0f);
  d.output_scales.resize(O);
  const double sx = config.src.scale[0], sy = config.dst ? config.dst->scale[0] : 1.0;
  for (int64_t o = 0; o < O; ++o) {
    const double sxw = sx * static_cast<double>(d.weights.scale[o]);
    d.output_scales[o] = static_cast<float>(sxw / sy);
    if (bias)
      d.bias_acc[o] = static_cast<float>(bias->get({o}) / sxw);
  }
  return d;
}

}  // namespace lathe
