// Int8DeviceExecutor: runs an Int8Model's static plan on an accelerator instead of the CPU. The
// engine never links a GPU library, so the CUDA executor (engine/backend/cuda/cuda_int8_model.h)
// registers itself here at start-up, as the CUDA backend does with make_backend(); the quantize
// stage asks for one when the experiment's backend is not the CPU.
#pragma once

#include <memory>
#include <string>

#include "engine/compress/quant/int8_model.h"

namespace lathe {

class Int8DeviceExecutor {
 public:
  virtual ~Int8DeviceExecutor() = default;
  /// images: f32 [N, ...model input shape...] on the executor's device (host images are uploaded);
  /// returns f32 logits [N, classes] on the device. Work is queued on the backend's stream.
  virtual Tensor forward(const Tensor& images) = 0;
  /// What runs the layers, for events ("cuBLASLt int8 GEMM (CudaInt8Model)").
  virtual std::string kernels() const = 0;
};

/// What a device library registers: why it cannot run a plan ("" when it can), and the executor.
struct Int8DeviceExecutorFactory {
  std::string (*refusal)(const Int8Model& model) = nullptr;
  std::unique_ptr<Int8DeviceExecutor> (*make)(Backend& backend, const Int8Model& model) = nullptr;
};

/// Registers the executor of the CUDA backend's devices (one per process; idempotent).
void register_cuda_int8_executor(const Int8DeviceExecutorFactory& factory);

/// Why `model` cannot run on `backend`'s device ("" when it can): no executor for that device in
/// this program, or a step of the plan the executor does not cover.
std::string int8_device_refusal(const Backend& backend, const Int8Model& model);

/// The executor for `backend`'s device; throws ConfigError with int8_device_refusal()'s reason.
/// `model` must outlive it.
std::unique_ptr<Int8DeviceExecutor> make_int8_device_executor(Backend& backend, const Int8Model& model);

}  // namespace lathe
