// CudaInt8Model: runs a static-PTQ Int8Model's plan (engine/compress/quant/int8_model.h) on an
// NVIDIA GPU, step for step: the f32 input quantized with the CPU's rounding (int8_quantize), every
// INT8 conv/linear on CudaInt8Conv2d / CudaInt8Linear built from the plan's own Int8LayerData (same
// quantized weights, folded scales, permuted columns), max pooling and ReLU on the 8-bit integers
// (kernels/int8_pool.cu), flatten of channels-last data as a view (the next Linear reads the
// channels-last rows; its columns are already in (H, W, C) order), f32 logits out. Same integers as
// the CPU plan's integer arithmetic (int8_layer.h); tests/gpu/cuda_int8_model_test.cpp checks it.
//
// Not covered (refusal() says which step, the constructor throws ConfigError): dynamic plans
// (per-batch max |x| and an f32 rescale between layers) and f32 steps other than a flatten
// (keep_f32 / mixed-precision layers, dequantize, f32 ReLU): those plans run on the CPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/compress/quant/int8_device_executor.h"

namespace lathe::cuda {

class CudaBackend;
class CudaInt8Linear;
class CudaInt8Conv2d;

class CudaInt8Model final : public Int8DeviceExecutor {
 public:
  /// Uploads every INT8 layer of `model`'s plan. `model` must outlive this object. Throws
  /// ConfigError with refusal()'s reason for a plan it does not cover.
  CudaInt8Model(CudaBackend& backend, const Int8Model& model);
  ~CudaInt8Model() override;

  /// images: f32 [N, ...model input shape...] on this device or the host (uploaded); returns
  /// device f32 logits [N, classes], queued on the backend's stream.
  Tensor forward(const Tensor& images) override;
  std::string kernels() const override;

  /// Why `model`'s plan cannot run here ("" when it can).
  static std::string refusal(const Int8Model& model);

 private:
  struct DeviceStep;
  CudaBackend& m_be;
  const Int8Model& m_model;
  std::vector<DeviceStep> m_steps;
};

/// Registers CudaInt8Model with the engine (register_cuda_int8_executor), so the quantize stage
/// runs INT8 on CUDA backends. Call at start-up next to register_backend(); idempotent.
void register_int8_executor();

}  // namespace lathe::cuda
