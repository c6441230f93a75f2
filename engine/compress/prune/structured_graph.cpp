// Channel-group analysis for structured pruning: one pass over the nodes in order, raw channel sets
// merged by residual Adds (union-find), then gathered into groups with producers, BatchNorms and
// consumers.
#include "engine/compress/prune/structured_graph.h"

#include <set>

#include "engine/nn/conv2d.h"
#include "engine/nn/linear.h"

namespace lathe {

bool is_structured_prunable_kind(const std::string& kind) { return kind == "conv2d" || kind == "linear"; }

int ChannelGraph::input_group(const Model& model, size_t node) const {
  const int in = model.node_inputs(node).at(0);
  return in == Model::kModelInput ? 0 : output_group.at(in);
}

namespace {

/// Raw channel sets before the residual merges, with a union-find over them.
struct RawSets {
  std::vector<int> parent;
  std::vector<int64_t> channels;
  std::vector<std::string> block;  // "" or why the set may not be pruned

  int make(int64_t n, const std::string& why = "") {
    parent.push_back(static_cast<int>(parent.size()));
    channels.push_back(n);
    block.push_back(why);
    return parent.back();
  }
  int root(int s) {
    while (parent[s] != s)
      s = parent[s] = parent[parent[s]];
    return s;
  }
  void merge(int a, int b) {
    a = root(a);
    b = root(b);
    if (a == b)
      return;
    if (b < a)
      std::swap(a, b);
    parent[b] = a;
    if (block[a].empty())
      block[a] = block[b];
  }
  void forbid(int s, const std::string& why) {
    s = root(s);
    if (block[s].empty())
      block[s] = why;
  }
};

/// Where a node's output channels live: a raw set and how many features each channel spans.
struct Channels {
  int set = 0;
  int64_t per_channel = 1;
};

std::string prunable_names(Model& model) {
  std::string list;
  for (size_t i = 0; i < model.size(); ++i)
    if (is_structured_prunable_kind(model.layer(i).kind()))
      list += (list.empty() ? "" : ", ") + model.node_name(i);
  return list.empty() ? "(none)" : list;
}

}  // namespace

ChannelGraph analyse_channels(Model& model, const std::vector<std::string>& exclude) {
  LATHE_CHECK(model.size() > 0, "structured pruning: the model has no layers");
  const std::vector<LayerInfo> infos = model.layer_infos();
  const size_t n = model.size();

  std::set<int> excluded;
  for (const std::string& name : exclude) {
    const int i = model.find(name);
    if (i < 0)
      throw ConfigError("prune.exclude: no layer named '" + name + "'; prunable layers: " + prunable_names(model));
    if (!is_structured_prunable_kind(model.layer(i).kind()))
      throw ConfigError("prune.exclude: layer '" + name + "' is a " + model.layer(i).kind() +
                        ", which has no filters or neurons to prune; prunable layers: " + prunable_names(model));
    excluded.insert(i);
  }

  RawSets sets;
  const Shape& in_shape = model.input_shape();
  sets.make(in_shape[0], "the model input");
  std::vector<Channels> out(n);
  std::vector<int> producer_set(n, -1);
  struct PendingConsumer {
    int node, set;
    int64_t per_channel;
  };
  std::vector<PendingConsumer> consumers;
  std::vector<std::pair<int, int>> batchnorms;  // (node, raw set)

  auto channels_of = [&](int input) { return input == Model::kModelInput ? Channels{0, 1} : out[input]; };
  auto shape_of = [&](int input) {
    if (input == Model::kModelInput) {
      Shape s = in_shape;
      s.insert(s.begin(), 1);
      return s;
    }
    return infos[input].output_shape;
  };

  for (size_t i = 0; i < n; ++i) {
    Layer& layer = model.layer(i);
    const std::string kind = layer.kind();
    const std::vector<int>& inputs = model.node_inputs(i);
    const Channels in = channels_of(inputs[0]);
    if (kind == "conv2d" || kind == "linear") {
      consumers.push_back({static_cast<int>(i), in.set, in.per_channel});
      const int64_t oc =
          kind == "conv2d" ? static_cast<Conv2d&>(layer).out_channels() : static_cast<Linear&>(layer).out_features();
      const int s = sets.make(oc);
      producer_set[i] = s;
      if (excluded.count(static_cast<int>(i)))
        sets.forbid(s, "excluded (prune.exclude names '" + model.node_name(i) + "')");
      out[i] = {s, 1};
    } else if (kind == "batchnorm2d") {
      batchnorms.push_back({static_cast<int>(i), in.set});
      out[i] = in;
    } else if (kind == "relu" || kind == "maxpool2d" || kind == "dropout") {
      out[i] = in;
    } else if (kind == "flatten") {
      const Shape s = shape_of(inputs[0]);
      int64_t spatial = 1;
      for (size_t d = 2; d < s.size(); ++d)
        spatial *= s[d];
      out[i] = {in.set, in.per_channel * spatial};
    } else if (kind == "add") {
      const Channels b = channels_of(inputs[1]);
      if (in.per_channel != b.per_channel) {
        const std::string why = "added ('" + model.node_name(i) + "') to a differently flattened tensor";
        sets.forbid(in.set, why);
        sets.forbid(b.set, why);
        out[i] = {sets.make(infos[i].output_shape.at(1), why), 1};
      } else {
        sets.merge(in.set, b.set);
        out[i] = {sets.root(in.set), in.per_channel};
      }
    } else {
      // A layer structured pruning does not know: neither its inputs nor its output may change size.
      for (int j : inputs)
        sets.forbid(channels_of(j).set, "read by '" + model.node_name(i) + "' (" + kind + "), which cannot be resized");
      out[i] = {sets.make(infos[i].output_shape.at(1), "the output of '" + model.node_name(i) + "' (" + kind + ")"), 1};
    }
  }
  sets.forbid(out[n - 1].set, "feeds the model output (the classes)");

  // Gather the raw sets into groups, numbered in order of first appearance (the input is group 0).
  ChannelGraph g;
  std::vector<int> group_of_root(sets.parent.size(), -1);
  auto group_of = [&](int raw) {
    const int r = sets.root(raw);
    if (group_of_root[r] < 0) {
      group_of_root[r] = static_cast<int>(g.groups.size());
      ChannelGroup grp;
      grp.channels = sets.channels[r];
      grp.prunable = sets.block[r].empty();
      grp.reason = sets.block[r];
      g.groups.push_back(grp);
    }
    return group_of_root[r];
  };
  group_of(0);
  g.output_group.resize(n);
  g.output_features_per_channel.resize(n);
  for (size_t i = 0; i < n; ++i) {
    g.output_group[i] = group_of(out[i].set);
    g.output_features_per_channel[i] = out[i].per_channel;
    if (producer_set[i] >= 0)
      g.groups[group_of(producer_set[i])].producers.push_back(static_cast<int>(i));
  }
  for (const auto& [node, raw] : batchnorms)
    g.groups[group_of(raw)].batchnorms.push_back(node);
  for (const PendingConsumer& c : consumers)
    g.groups[group_of(c.set)].consumers.push_back({c.node, c.per_channel});
  for (ChannelGroup& grp : g.groups)
    if (grp.prunable && grp.producers.empty()) {
      grp.prunable = false;
      grp.reason = "has no Linear/Conv2d producer";
    }
  return g;
}

}  // namespace lathe
