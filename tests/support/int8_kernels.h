// Test adapters: an INT8 linear / conv2d made from f32 weights (make_int8_layer) and prepared on the
// cpu backend (oneDNN) beside the reference backend's loops, the pair the INT8 tests compare.
#pragma once

#include <memory>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/compress/quant/int8_layer.h"

namespace lathe::test {

inline Backend& cpu_backend() {
  static DnnlBackend be;
  return be;
}
inline Backend& reference_backend() {
  static ReferenceBackend be;
  return be;
}

class Int8Pair {
 public:
  Int8Pair(const Tensor& weights, const Tensor* bias, const Int8LayerConfig& config, const ConvParams* conv)
      : m_layer(make_int8_layer(weights, bias, config)),
        m_fast(cpu_backend().make_int8_kernel(m_layer, conv)),
        m_ref(reference_backend().make_int8_kernel(m_layer, conv)) {}
  Tensor forward(const Tensor& src) { return m_fast->forward(src); }
  Tensor forward_reference(const Tensor& src) const { return m_ref->forward(src); }
  const QuantParams& src_params() const { return m_layer.config.src; }
  DType dst_dtype() const { return m_layer.dst_dtype(); }
  const Int8LayerData& layer() const { return m_layer; }
  std::string implementation() const { return m_fast->implementation(); }

 private:
  Int8LayerData m_layer;
  std::unique_ptr<Int8Kernel> m_fast, m_ref;
};

struct Int8Linear : Int8Pair {
  Int8Linear(const Tensor& weights, const Tensor* bias, const Int8LayerConfig& config)
      : Int8Pair(weights, bias, config, nullptr) {}
};

struct Int8Conv2d : Int8Pair {
  Int8Conv2d(const ConvParams& p, const Tensor& weights, const Tensor* bias, const Int8LayerConfig& config)
      : Int8Pair(weights, bias, config, &p) {}
};

}  // namespace lathe::test
