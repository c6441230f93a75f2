// Pruning masks: which weights of a model's Linear/Conv2d layers are kept. Magnitude (L1,
// unstructured, global or per layer) and N:M (the 2:4 layout sparse tensor cores use) selection, and
// the invariants a pruned run needs: pruned weights zero, their gradients and optimizer state zero.
// Host tensors only in this increment (the trainer wiring, issue #5, moves them as needed).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/nn/model.h"

namespace lathe {

struct PruneMask {
  std::string param;  // full parameter name, "0.weight"
  Tensor keep;        // u8, same shape as the weight, row-major contiguous; 1 = kept, 0 = pruned
};

/// Magnitude pruning of every prunable weight (the `weight` of each Linear and Conv2d; never biases).
/// Exactly round(sparsity * n) entries are pruned, the smallest |w| first, ties broken by position
/// (layer order, then row-major index). `global`: one threshold over all prunable weights together
/// (n = their total size); otherwise each layer is pruned to `sparsity` on its own. `exclude` names
/// layers ("0") or parameters ("0.weight") to leave dense; they get no mask. Throws ConfigError for a
/// sparsity outside [0, 1] or an exclusion that names no prunable layer.
std::vector<PruneMask> magnitude_masks(Model& model, double sparsity, bool global,
                                       const std::vector<std::string>& exclude = {});

/// N:M pruning: in every group of `m` consecutive weights along the input dimension, keep the `n`
/// largest |w| and prune the other m - n (ties: the earlier index is kept). Linear [O, K]: groups of
/// m consecutive k; Conv2d [O, C, KH, KW]: groups of m consecutive c at each (o, kh, kw). Throws
/// ConfigError naming the layer when the group dimension is not a multiple of m, or for 0 < n <= m violated.
std::vector<PruneMask> nm_masks(Model& model, int n = 2, int m = 4, const std::vector<std::string>& exclude = {});

/// Zeros `t` where mask.keep is 0 (t has the weight's shape, any layout). For optimizer state too.
void mask_tensor(Tensor& t, const PruneMask& mask);
/// Zeros the 1-D `t` where mask.keep is 0 from element `offset` on: a slice of the weight's elements
/// (row-major), as a ZeRO-1 rank keeps its optimizer state (Optimizer::state_offset).
void mask_tensor_slice(Tensor& t, const PruneMask& mask, int64_t offset);
/// Zeros the pruned weights of `model`. Throws lathe::Error if a mask names no parameter of it.
void apply_masks(Model& model, const std::vector<PruneMask>& masks);
/// Zeros the gradients of the pruned weights; call after backward, before the optimizer step.
void mask_gradients(Model& model, const std::vector<PruneMask>& masks);
/// Zeros the pruned entries of per-parameter state (momentum buffers ...): `find` maps a parameter
/// name to its state tensor, or nullptr when it has none (yet); those are skipped.
void mask_state(const std::vector<PruneMask>& masks, const std::function<Tensor*(const std::string& param)>& find);

/// Fraction of exact zeros in `t` (0 for an empty tensor).
double sparsity(const Tensor& t);

struct ParamSparsity {
  std::string name;  // "0.weight"
  int64_t zeros = 0, total = 0;
  double fraction() const { return total ? static_cast<double>(zeros) / total : 0.0; }
};

struct SparsityReport {
  std::vector<ParamSparsity> params;  // the prunable weights, in model order
  int64_t zeros = 0, total = 0;       // over those
  double overall() const { return total ? static_cast<double>(zeros) / total : 0.0; }
};

/// Zero counts of every prunable weight of `model` (whether masked or not).
SparsityReport sparsity_report(Model& model);

/// The prunable weights of a model (Linear/Conv2d `weight`s), in model order.
std::vector<NamedParam> prunable_weights(Model& model);

}  // namespace lathe
