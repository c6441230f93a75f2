// The registry of device INT8 executors (see int8_device_executor.h).
#include "engine/compress/quant/int8_device_executor.h"

namespace lathe {

namespace {

Int8DeviceExecutorFactory& cuda_factory() {
  static Int8DeviceExecutorFactory f;
  return f;
}

}  // namespace

void register_cuda_int8_executor(const Int8DeviceExecutorFactory& factory) { cuda_factory() = factory; }

std::string int8_device_refusal(const Backend& backend, const Int8Model& model) {
  const Device d = backend.device();
  if (d.is_cpu())
    return "backend '" + backend.name() + "' runs on the CPU: Int8Model::forward is its executor";
  const Int8DeviceExecutorFactory& f = cuda_factory();
  if (!f.refusal || !f.make)
    return "this program has no INT8 executor for " + d.str() + " (lathe::cuda::register_int8_executor not called)";
  return f.refusal(model);
}

std::unique_ptr<Int8DeviceExecutor> make_int8_device_executor(Backend& backend, const Int8Model& model) {
  const std::string why = int8_device_refusal(backend, model);
  if (!why.empty())
    throw ConfigError("INT8 on " + backend.device_name() + ": " + why);
  return cuda_factory().make(backend, model);
}

}  // namespace lathe
