// Low-rank factorisation of a Model: each chosen Linear W[out, in] becomes Linear(in -> r, no bias)
// then Linear(r -> out, bias), and each Conv2d W[out, in, kh, kw] (as a [out, in*kh*kw] matrix)
// becomes Conv2d(in -> r, kh x kw, same stride and padding, no bias) then a 1x1 Conv2d (r -> out,
// bias), from the truncated SVD W ~ (U_r S_r^1/2)(S_r^1/2 V_r^T). The result is an ordinary dense
// Model with fewer parameters, run by the backends' own kernels, so its bytes and time are real.
//
// Node names follow PyTorch's nested nn.Sequential: node "2" becomes "2.0" (the r-wide factor) and
// "2.1" (the output factor), so a factored state_dict reads `2.0.weight`, `2.1.weight`, `2.1.bias`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/compress/lowrank/svd.h"
#include "engine/nn/model.h"

namespace lathe {

enum class LowRankScope {
  layer,   ///< each layer meets the energy threshold / bytes target on its own
  global,  ///< one energy threshold / one bytes budget over all candidate layers
};

/// How ranks are chosen: a fixed rank (rank > 0), else an energy fraction (energy > 0), else the
/// bytes target.
struct LowRankOptions {
  int64_t rank = 0;                 ///< > 0: this rank for every layer (capped at min(out, in*kh*kw))
  double energy = 0;                ///< in (0, 1]: kept fraction of sum sigma^2; 0 = use the bytes target
  double target_bytes_ratio = 0.5;  ///< factors' bytes / dense weights' bytes, in (0, 1)
  LowRankScope scope = LowRankScope::layer;
  std::vector<std::string> exclude;  ///< Linear/Conv2d nodes kept dense
};

/// One Linear/Conv2d of the original model.
struct LowRankLayer {
  std::string name, kind;
  int64_t rows = 0, cols = 0;  ///< the weight as a matrix: out x in*kh*kw
  int64_t rank = 0;            ///< kept singular values; 0 = left dense
  double kept_energy = 1;      ///< sum of the kept sigma^2 / sum of all (1 when dense)
  std::string dense_because;   ///< why a layer was left dense ("" when factored)
  int64_t weight_values_before = 0, weight_values_after = 0;
};

struct LowRankReport {
  std::vector<LowRankLayer> layers;  ///< every Linear/Conv2d, in model order
  int64_t params_before = 0, params_after = 0;
  int64_t weight_values_before = 0, weight_values_after = 0;  ///< Linear/Conv2d weights only
};

/// Throws ConfigError naming the lowrank.* field and what is allowed.
void validate_lowrank_options(const LowRankOptions& options);

/// Everything plan_lowrank checks except the weights (no SVD): the options, that every exclusion
/// names a Linear/Conv2d node, that convolutions are square and that every node can be rebuilt.
/// For the stage's set-up on the untrained model. Throws ConfigError naming the field.
void check_lowrank_model(Model& model, const LowRankOptions& options);

/// A plan: the report (ranks, reasons) and the SVD of every factored layer (by model node index).
struct LowRankPlan {
  LowRankReport report;
  std::vector<int> node;  ///< per report layer: its model node index
  std::vector<Svd> svd;   ///< per report layer (empty for excluded layers)
};

/// Computes every candidate layer's SVD (in double, from the weights on `be`) and chooses the ranks.
/// A layer is left dense when excluded or when the chosen rank would not save bytes. Throws
/// ConfigError for an exclusion that names no Linear/Conv2d node, or a conv that is not square.
LowRankPlan plan_lowrank(Model& model, Backend& be, const LowRankOptions& options);

/// The factored model of a plan: every other node is copied with its parameters and buffers; node
/// inputs that named a factored node name its output factor.
std::unique_ptr<Model> build_lowrank_model(Model& model, Backend& be, const LowRankPlan& plan);

/// plan_lowrank + build_lowrank_model; the report goes to *report when given.
std::unique_ptr<Model> factorize_model(Model& model, Backend& be, const LowRankOptions& options,
                                       LowRankReport* report = nullptr);

}  // namespace lathe
