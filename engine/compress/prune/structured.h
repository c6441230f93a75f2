// Structured pruning that physically removes Conv2d filters and Linear neurons: rank each layer's
// output channels by the L1 or L2 norm of their weights, choose the channels to keep (per layer or
// globally across layers), and build a new, smaller dense Model whose BatchNorms and consumers drop
// the matching channels and input features. The result runs with the ordinary dense kernels, so the
// savings in bytes and time are real.
//
// Residual groups (channels tied by an Add) use a SHARED ranking: a channel's score is the mean,
// over the group's producers, of its norm divided by that producer's mean norm, and every producer
// keeps the same channel set (the Add needs equal shapes). Normalising by each layer's mean norm also
// makes scores comparable across layers in the global scope.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/compress/prune/structured_graph.h"
#include "engine/nn/model.h"

namespace lathe {

enum class StructuredNorm { l1, l2 };
enum class StructuredScope {
  layer,   ///< each prunable group loses round(ratio x its channels)
  global,  ///< round(ratio x all prunable channels) are removed where the normalised scores are lowest
};

struct StructuredOptions {
  StructuredNorm norm = StructuredNorm::l1;
  StructuredScope scope = StructuredScope::layer;
  double ratio = 0.5;                ///< fraction of filters/neurons removed, in [0, 1)
  std::vector<std::string> exclude;  ///< Linear/Conv2d nodes whose filters/neurons are all kept
  int64_t min_channels = 1;          ///< every pruned layer keeps at least this many
};

/// The channels each group keeps, ascending (all of them for groups that are not pruned).
struct StructuredPlan {
  ChannelGraph graph;
  std::vector<std::vector<int64_t>> kept;  ///< per group of graph.groups
};

/// One Linear/Conv2d's output channels before and after.
struct StructuredLayerChange {
  std::string name, kind;
  int64_t channels_before = 0, channels_after = 0;
  std::string not_pruned_because;  ///< "" when it was a candidate
};

struct StructuredReport {
  std::vector<StructuredLayerChange> layers;  ///< every Linear/Conv2d, in model order
  int64_t params_before = 0, params_after = 0;
  int64_t flops_before = 0, flops_after = 0;  ///< forward FLOPs per sample
  /// Pruned over dense forward FLOPs per sample (1 = nothing removed).
  double flops_ratio() const { return flops_before ? static_cast<double>(flops_after) / flops_before : 1.0; }
};

/// Throws ConfigError naming the field and the allowed values (prune.ratio in [0, 1), min_channels >= 1).
void validate_structured_options(const StructuredOptions& options);

/// Per-channel scores (L1 or L2 norm of each output filter/neuron) of a Linear/Conv2d node's weight.
std::vector<double> channel_norms(Model& model, Backend& backend, int node, StructuredNorm norm);

/// Decides which channels each group keeps. The model is not changed.
StructuredPlan plan_structured(Model& model, Backend& backend, const StructuredOptions& options);

/// Builds the smaller model that `plan` describes: same node names, inputs, layer settings, ReLU
/// fusion, compute precision and dtype; parameters and BatchNorm statistics copied from the kept
/// channels. `model` is not changed.
std::unique_ptr<Model> build_pruned_model(Model& model, Backend& backend, const StructuredPlan& plan);

/// Plans and builds in one call; fills `report` when given.
std::unique_ptr<Model> prune_structured(Model& model, Backend& backend, const StructuredOptions& options,
                                        StructuredReport* report = nullptr);

}  // namespace lathe
