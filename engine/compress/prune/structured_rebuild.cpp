// build_pruned_model: the smaller dense model of a structured-pruning plan. Every node is rebuilt
// with its old settings and the kept channel counts; weights, biases and BatchNorm statistics are
// gathered from the kept rows (output channels) and columns (input channels / features).
#include <cmath>

#include "engine/compress/prune/structured.h"
#include "engine/nn/batchnorm2d.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/linear.h"

namespace lathe {

namespace {

Tensor to_host(Backend& be, const Tensor& t) {
  if (t.device().is_cpu())
    return t.contiguous_copy();
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  be.copy(t, host);
  return host;
}

void from_host(Backend& be, const Tensor& host, Tensor& dst) {
  LATHE_CHECK(host.shape() == dst.shape() && host.dtype() == dst.dtype(), "structured pruning: copying ",
              host.describe(), " into ", dst.describe());
  if (dst.device().is_cpu())
    host.copy_to(dst);
  else
    be.copy(host, dst);
}

/// `src` with dimension 0 restricted to `rows` and dimension 1 to `cols` (nullptr: all), on the host.
Tensor select(Backend& be, const Tensor& src, const std::vector<int64_t>* rows, const std::vector<int64_t>* cols) {
  const Tensor host = to_host(be, src);
  const Shape& s = host.shape();
  const int64_t d0 = s.at(0), d1 = s.size() > 1 ? s[1] : 1, inner = s.size() > 1 ? host.numel() / (d0 * d1) : 1;
  LATHE_CHECK(!cols || s.size() > 1, "structured pruning: column selection on a 1-D tensor");
  Shape out_shape = s;
  out_shape[0] = rows ? static_cast<int64_t>(rows->size()) : d0;
  if (cols)
    out_shape[1] = static_cast<int64_t>(cols->size());
  Tensor out = Tensor::empty(out_shape, host.dtype());
  const int64_t n_rows = out_shape[0], n_cols = s.size() > 1 ? out_shape[1] : 1;
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t sr = rows ? (*rows)[r] : r;
    for (int64_t c = 0; c < n_cols; ++c) {
      const int64_t sc = cols ? (*cols)[c] : c;
      const int64_t src_base = (sr * d1 + sc) * inner, dst_base = (r * n_cols + c) * inner;
      for (int64_t k = 0; k < inner; ++k)
        out.set_flat(dst_base + k, host.at_flat(src_base + k));
    }
  }
  return out;
}

/// The input features a consumer keeps: each kept channel spans `per_channel` consecutive features.
std::vector<int64_t> expand(const std::vector<int64_t>& kept, int64_t per_channel) {
  std::vector<int64_t> out;
  out.reserve(kept.size() * per_channel);
  for (int64_t c : kept)
    for (int64_t j = 0; j < per_channel; ++j)
      out.push_back(c * per_channel + j);
  return out;
}

struct NodeSelection {
  std::vector<int64_t> out_channels;  // rows of weights / BatchNorm entries
  std::vector<int64_t> in_features;   // columns of weights
};

}  // namespace

std::unique_ptr<Model> build_pruned_model(Model& model, Backend& be, const StructuredPlan& plan) {
  const ChannelGraph& g = plan.graph;
  LATHE_CHECK(g.output_group.size() == model.size() && plan.kept.size() == g.groups.size(),
              "structured pruning: the plan was made for another model");
  auto pruned = std::make_unique<Model>(model.input_shape());
  pruned->set_fuse_relu(model.fuse_relu());
  std::vector<NodeSelection> sel(model.size());

  for (size_t i = 0; i < model.size(); ++i) {
    Layer& layer = model.layer(i);
    const std::string kind = layer.kind();
    const std::vector<int64_t>& kept_out = plan.kept[g.output_group[i]];
    const int in_node = model.node_inputs(i)[0];
    const int64_t per_channel = in_node == Model::kModelInput ? 1 : g.output_features_per_channel[in_node];
    const std::vector<int64_t> in_features = expand(plan.kept[g.input_group(model, i)], per_channel);
    std::unique_ptr<Layer> fresh;
    if (kind == "conv2d") {
      auto& c = static_cast<Conv2d&>(layer);
      const ConvParams& p = c.conv_params();
      LATHE_CHECK(
          p.stride_h == p.stride_w && p.pad_h == p.pad_w && static_cast<int64_t>(in_features.size()) <= c.in_channels(),
          "structured pruning: conv2d '", model.node_name(i), "' has an unexpected shape");
      fresh = std::make_unique<Conv2d>(static_cast<int64_t>(in_features.size()), static_cast<int64_t>(kept_out.size()),
                                       c.kernel(), p.stride_h, p.pad_h, c.has_bias());
      sel[i] = {kept_out, in_features};
    } else if (kind == "linear") {
      auto& l = static_cast<Linear&>(layer);
      LATHE_CHECK(static_cast<int64_t>(in_features.size()) <= l.in_features(), "structured pruning: linear '",
                  model.node_name(i), "' reads ", l.in_features(), " features, the plan keeps ", in_features.size());
      fresh = std::make_unique<Linear>(static_cast<int64_t>(in_features.size()), static_cast<int64_t>(kept_out.size()),
                                       l.has_bias());
      sel[i] = {kept_out, in_features};
    } else if (kind == "batchnorm2d") {
      auto& b = static_cast<BatchNorm2d&>(layer);
      fresh = std::make_unique<BatchNorm2d>(static_cast<int64_t>(kept_out.size()), b.bn_params().eps,
                                            b.bn_params().momentum);
      sel[i] = {kept_out, {}};
    } else {  // layers without a channel dimension of their own: the same configuration
      fresh = layer.fresh_copy();
      if (!fresh)
        throw ConfigError("structured pruning cannot rebuild layer '" + model.node_name(i) + "' of kind " + kind +
                          "; supported: linear, conv2d, batchnorm2d, maxpool2d, dropout, relu, flatten, add");
    }
    std::vector<std::string> inputs;
    for (int j : model.node_inputs(i))
      inputs.push_back(j == Model::kModelInput ? "input" : model.node_name(j));
    pruned->add(model.node_name(i), std::move(fresh), inputs);
  }

  Rng unused(0);  // every parameter is overwritten below
  pruned->create_params(be, model.dtype(), unused);
  pruned->set_compute_precision(model.compute_precision());
  pruned->set_low_precision_activations(model.low_precision_activations());

  for (size_t i = 0; i < model.size(); ++i) {
    const std::string kind = model.layer(i).kind();
    std::vector<Param*> from = model.layer(i).params(), to = pruned->layer(i).params();
    LATHE_CHECK(from.size() == to.size(), "structured pruning: parameter lists of '", model.node_name(i), "' differ");
    for (size_t k = 0; k < from.size(); ++k) {
      const bool is_weight = from[k]->name == "weight" && kind != "batchnorm2d";
      const Tensor host = select(be, from[k]->value, &sel[i].out_channels, is_weight ? &sel[i].in_features : nullptr);
      from_host(be, host, to[k]->value);
    }
    std::vector<Buffer*> bfrom = model.layer(i).buffers(), bto = pruned->layer(i).buffers();
    LATHE_CHECK(bfrom.size() == bto.size(), "structured pruning: buffer lists of '", model.node_name(i), "' differ");
    for (size_t k = 0; k < bfrom.size(); ++k) {
      const bool per_channel = bfrom[k]->name != "num_batches_tracked";
      const Tensor host = select(be, bfrom[k]->value, per_channel ? &sel[i].out_channels : nullptr, nullptr);
      from_host(be, host, bto[k]->value);
    }
  }
  return pruned;
}

}  // namespace lathe
