// Model <-> safetensors: name mapping, dtype checks and host/device copies.
#include "engine/nn/model_io.h"

#include <filesystem>
#include <set>

#include "engine/nn/safetensors.h"

namespace lathe {

int64_t save_model(Model& model, Backend& backend, const std::string& path,
                   const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  auto to_host = [&](const Tensor& t) {
    if (t.device().is_cpu())
      return t;
    Tensor h = Tensor::empty(t.shape(), t.dtype());
    backend.copy(t, h);
    return h;
  };
  for (const NamedParam& p : model.named_params())
    tensors.emplace_back(p.name, to_host(p.param->value));
  for (const NamedBuffer& b : model.named_buffers())
    tensors.emplace_back(b.name, to_host(b.buffer->value));
  save_safetensors(path, tensors, metadata);
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

void load_model_weights(Model& model, Backend& backend, const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  load_named_tensors(model, backend, file.tensors, path);
}

void load_named_tensors(Model& model, Backend& backend, const std::vector<std::pair<std::string, Tensor>>& tensors,
                        const std::string& path) {
  std::map<std::string, Tensor*> targets;
  for (const NamedParam& p : model.named_params())
    targets[p.name] = &p.param->value;
  for (const NamedBuffer& b : model.named_buffers())
    targets[b.name] = &b.buffer->value;
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    auto it = targets.find(name);
    if (it == targets.end())
      throw DataError(path + ": tensor '" + name + "' is not a parameter of this model");
    Tensor& dst = *it->second;
    // A one-element counter is a scalar [] in PyTorch (num_batches_tracked) and [1] in Lathe.
    const bool one_element = t.numel() == 1 && dst.numel() == 1 && t.shape().size() <= 1 && dst.shape().size() <= 1;
    if (t.shape() != dst.shape() && !one_element)
      throw DataError(path + ": tensor '" + name + "' has shape " + shape_str(t.shape()) + ", the model expects " +
                      shape_str(dst.shape()));
    if (t.dtype() == dst.dtype() && t.shape() == dst.shape()) {
      backend.copy(t, dst);
    } else {
      // e.g. an int64 num_batches_tracked from PyTorch stored as another int type, or f64 weights.
      Tensor converted = Tensor::empty(dst.shape(), dst.dtype());
      for (int64_t i = 0; i < t.numel(); ++i)
        converted.set_flat(i, t.at_flat(i));
      backend.copy(converted, dst);
    }
    seen.insert(name);
  }
  for (const auto& [name, _] : targets)
    if (!seen.count(name))
      throw DataError(path + ": missing tensor '" + name + "'");
}

}  // namespace lathe
