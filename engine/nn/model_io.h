// Saving and loading a Model's weights as safetensors, with PyTorch state_dict names, so a PyTorch
// user loads a Lathe model with `model.load_state_dict(safetensors.torch.load_file(path))`.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/nn/model.h"

namespace lathe {

/// Writes every parameter and buffer (host copies, logical NCHW order) atomically to `path`.
/// Returns the file's size in bytes (the real `model/bytes`).
int64_t save_model(Model& model, Backend& backend, const std::string& path,
                   const std::map<std::string, std::string>& metadata = {});

/// Loads weights by name into a model whose params already exist (create_params first). Every
/// parameter must be in the file with its shape; unknown names in the file are rejected too
/// (strict, as PyTorch's load_state_dict). Throws DataError naming the tensor and both shapes.
void load_model_weights(Model& model, Backend& backend, const std::string& path);

/// The same for tensors already in memory (host, any dtype), `source` naming them in messages:
/// every parameter and buffer must be given with its shape, and nothing else.
void load_named_tensors(Model& model, Backend& backend, const std::vector<std::pair<std::string, Tensor>>& tensors,
                        const std::string& source);

}  // namespace lathe
