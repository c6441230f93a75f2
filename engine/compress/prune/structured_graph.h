// Channel groups for structured pruning: which output channels of which nodes must shrink together.
// A Linear/Conv2d creates a new set of channels (its filters or neurons); BatchNorm2d, ReLU,
// MaxPool2d and Dropout pass channels through; Flatten turns each channel into H*W consecutive
// features; a residual Add ties the channels of its two inputs into one group, so every producer of
// the group keeps the same channel set. Each group records its producers (whose filters are removed),
// its BatchNorms (which drop the same channels) and its consumers (which drop matching inputs).
#pragma once

#include <string>
#include <vector>

#include "engine/nn/model.h"

namespace lathe {

/// A node that reads a group's channels as its input: a Conv2d (input channels) or a Linear (input
/// features; `features_per_channel` is H*W after a Flatten, 1 otherwise).
struct ChannelConsumer {
  int node = 0;
  int64_t features_per_channel = 1;
};

/// Channels that are removed together.
struct ChannelGroup {
  int64_t channels = 0;
  std::vector<int> producers;   ///< Linear/Conv2d nodes whose output channels these are (model order)
  std::vector<int> batchnorms;  ///< BatchNorm2d nodes normalising these channels
  std::vector<ChannelConsumer> consumers;
  bool prunable = true;  ///< false: the model input, the model output, excluded, or read by an unknown layer
  std::string reason;    ///< why not prunable ("" when prunable)
};

struct ChannelGraph {
  std::vector<ChannelGroup> groups;                  ///< group 0 is the model input's channels
  std::vector<int> output_group;                     ///< per node: the group of its output's dimension 1
  std::vector<int64_t> output_features_per_channel;  ///< per node: H*W after a Flatten, else 1
  /// The group a node's first input belongs to (the model input's group for the first node).
  int input_group(const Model& model, size_t node) const;
};

/// Analyses `model` (params created). `exclude` names Linear/Conv2d nodes whose output channels are
/// kept; their group is then not pruned. The last node's output (the classes) is never pruned.
/// Throws ConfigError (prune.exclude: ...) for a name that is no node or no Linear/Conv2d.
ChannelGraph analyse_channels(Model& model, const std::vector<std::string>& exclude = {});

/// "conv2d", "linear": the layer kinds whose output channels structured pruning removes.
bool is_structured_prunable_kind(const std::string& kind);

}  // namespace lathe
