// resize_to_weights: rebuilds the sized layers from the weights' shapes, copies the others.
#include "engine/nn/model_resize.h"

#include <map>

#include "engine/nn/batchnorm2d.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/linear.h"

namespace lathe {

std::unique_ptr<Model> resize_to_weights(Model& model, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                         const std::string& source) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : tensors)
    by_name[name] = &t;
  auto out = std::make_unique<Model>(model.input_shape());
  out->set_fuse_relu(model.fuse_relu());
  for (size_t i = 0; i < model.size(); ++i) {
    const std::string& name = model.node_name(i);
    Layer& layer = model.layer(i);
    auto weight = [&](size_t rank) -> const Shape& {
      auto it = by_name.find(name + ".weight");
      if (it == by_name.end())
        throw DataError(source + ": no tensor '" + name + ".weight' for node '" + name + "' (" + layer.kind() + ")");
      if (it->second->shape().size() != rank)
        throw DataError(source + ": tensor '" + name + ".weight' has shape " + shape_str(it->second->shape()) +
                        ", node '" + name + "' (" + layer.kind() + ") needs rank " + std::to_string(rank));
      return it->second->shape();
    };
    std::unique_ptr<Layer> sized;
    if (auto* conv = dynamic_cast<Conv2d*>(&layer)) {
      const Shape& w = weight(4);
      if (w[2] != conv->kernel() || w[3] != conv->kernel())
        throw DataError(source + ": tensor '" + name + ".weight' has kernel " + std::to_string(w[2]) + "x" +
                        std::to_string(w[3]) + ", node '" + name + "' has " + std::to_string(conv->kernel()));
      sized = std::make_unique<Conv2d>(w[1], w[0], conv->kernel(), conv->conv_params().stride_h,
                                       conv->conv_params().pad_h, conv->has_bias());
    } else if (auto* linear = dynamic_cast<Linear*>(&layer)) {
      const Shape& w = weight(2);
      sized = std::make_unique<Linear>(w[1], w[0], linear->has_bias());
    } else if (auto* bn = dynamic_cast<BatchNorm2d*>(&layer)) {
      sized = std::make_unique<BatchNorm2d>(weight(1)[0], bn->bn_params().eps, bn->bn_params().momentum);
    } else {
      sized = layer.fresh_copy();
      LATHE_CHECK(sized, "resize_to_weights: node '", name, "' (", layer.kind(), ") cannot be copied");
    }
    std::vector<std::string> inputs;
    for (int j : model.node_inputs(i))
      inputs.push_back(j == Model::kModelInput ? "input" : model.node_name(static_cast<size_t>(j)));
    out->add(name, std::move(sized), inputs);
  }
  return out;
}

}  // namespace lathe
