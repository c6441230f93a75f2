// CudaInt8Linear: the INT8 linear layer of engine/compress/quant (int8_layer.h arithmetic) on an
// NVIDIA GPU: s8 weights x u8/s8 activations -> int32 on cuBLASLt's int8 tensor-core GEMM, then our
// epilogue kernel (zero-point compensation, bias, per-channel output scale, fused ReLU, requantize
// to u8/s8 or f32 out). It takes the layer as the CPU side prepared it (Int8LayerData: the same
// quantized weights and folded scales), so GPU and CPU results are the same integers; the CPU
// reference int8_linear_reference is the oracle of its tests (tests/gpu, label gpu).
//
// cuBLASLt's int8 GEMM wants signed operands, K and the row count of A in multiples of 4 and
// 16-byte aligned leading dimensions: activations are packed as s8 (u8 - 128, the shift corrected
// by comp[o] = (128 - z_x) * sum_k w[o, k]), and K and O are padded to multiples of 16 with zeros.
#pragma once

#include <memory>

#include "engine/compress/quant/int8_layer.h"

namespace lathe::cuda {

class CudaBackend;

class CudaInt8Linear {
 public:
  /// `layer` from make_int8_layer (host). Uploads the padded weights and the epilogue vectors.
  CudaInt8Linear(CudaBackend& backend, const Int8LayerData& layer);
  ~CudaInt8Linear();
  CudaInt8Linear(const CudaInt8Linear&) = delete;
  CudaInt8Linear& operator=(const CudaInt8Linear&) = delete;

  /// src: device [N, K] in the layer's src dtype (u8 or s8, row-major); returns device [N, O] in the
  /// layer's dst dtype (u8/s8, or f32 for the last layer).
  Tensor forward(const Tensor& src);

  int64_t in_features() const { return m_k; }
  int64_t out_features() const { return m_o; }

 private:
  struct Impl;
  CudaBackend& m_be;
  Int8LayerData m_layer;  // host copy: config and scales
  int64_t m_k, m_o, m_kp, m_op;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace lathe::cuda
