// Host copies of INT8-coverable models (see int8_host_model.h).
#include "engine/compress/quant/int8_host_model.h"

#include "engine/compress/quant/int8_model.h"
#include "engine/core/rng.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/maxpool2d.h"
#include "engine/nn/relu.h"

namespace lathe {

namespace {

/// A fresh layer of the same kind and configuration (parameters not created yet).
std::unique_ptr<Layer> same_layer(Layer& layer, const std::string& node) {
  const std::string kind = layer.kind();
  if (kind == "linear") {
    auto& l = static_cast<Linear&>(layer);
    return std::make_unique<Linear>(l.in_features(), l.out_features(), l.has_bias());
  }
  if (kind == "conv2d") {
    auto& c = static_cast<Conv2d&>(layer);
    const ConvParams& p = c.conv_params();
    LATHE_CHECK(p.stride_h == p.stride_w && p.pad_h == p.pad_w, "host copy of '", node,
                "': rectangular strides or padding are not copied");
    return std::make_unique<Conv2d>(c.in_channels(), c.out_channels(), c.kernel(), p.stride_h, p.pad_h, c.has_bias());
  }
  if (kind == "maxpool2d") {
    const PoolParams& p = static_cast<MaxPool2d&>(layer).pool_params();
    LATHE_CHECK(p.kernel_h == p.kernel_w && p.stride_h == p.stride_w && p.pad_h == p.pad_w, "host copy of '", node,
                "': rectangular pooling is not copied");
    return std::make_unique<MaxPool2d>(p.kernel_h, p.stride_h, p.pad_h);
  }
  if (kind == "relu")
    return std::make_unique<ReLU>();
  if (kind == "flatten")
    return std::make_unique<Flatten>();
  if (kind == "dropout") {
    auto& d = static_cast<Dropout&>(layer);
    return std::make_unique<Dropout>(d.p(), d.seed());
  }
  throw ConfigError("quant: node '" + node + "' is a " + kind +
                    ", which the host copy for CPU INT8 does not cover (conv2d, linear, relu, maxpool2d, flatten, "
                    "dropout)");
}

}  // namespace

std::unique_ptr<Model> int8_host_model(Model& model, Backend& from, Backend& host) {
  LATHE_CHECK(host.device().is_cpu(), "int8_host_model: target backend '", host.name(), "' is not on the host");
  int8_activation_taps(model);  // throws ConfigError, naming the node, for what INT8 does not cover
  auto copy = std::make_unique<Model>(model.input_shape());
  copy->set_fuse_relu(model.fuse_relu());
  for (size_t i = 0; i < model.size(); ++i)  // a chain: int8_activation_taps checked it
    copy->add(model.node_name(i), same_layer(model.layer(i), model.node_name(i)));
  Rng rng(0);  // every value is overwritten below
  copy->create_params(host, model.dtype(), rng);
  copy->set_compute_precision(model.compute_precision());
  const std::vector<NamedParam> src = model.named_params(), dst = copy->named_params();
  LATHE_CHECK(src.size() == dst.size(), "int8_host_model: ", src.size(), " parameters copied into ", dst.size());
  for (size_t i = 0; i < src.size(); ++i) {
    LATHE_CHECK(src[i].name == dst[i].name, "int8_host_model: parameter ", src[i].name, " copied into ", dst[i].name);
    from.copy(src[i].param->value, dst[i].param->value);
  }
  from.synchronize();
  return copy;
}

}  // namespace lathe
