// Host copies of INT8-coverable models (see int8_host_model.h).
#include "engine/compress/quant/int8_host_model.h"

#include "engine/compress/quant/int8_model.h"
#include "engine/core/rng.h"

namespace lathe {

std::unique_ptr<Model> int8_host_model(Model& model, Backend& from, Backend& host) {
  LATHE_CHECK(host.device().is_cpu(), "int8_host_model: target backend '", host.name(), "' is not on the host");
  int8_activation_taps(model);  // throws ConfigError, naming the node, for what INT8 does not cover
  auto copy = std::make_unique<Model>(model.input_shape());
  copy->set_fuse_relu(model.fuse_relu());
  for (size_t i = 0; i < model.size(); ++i) {  // the same graph: each node reads the same nodes
    std::unique_ptr<Layer> layer = model.layer(i).fresh_copy();
    if (!layer)
      throw ConfigError("quant: node '" + model.node_name(i) + "' is a " + model.layer(i).kind() +
                        ", which the host copy for CPU INT8 does not cover");
    std::vector<std::string> inputs;
    for (int j : model.node_inputs(i))
      inputs.push_back(j == Model::kModelInput ? "input" : model.node_name(static_cast<size_t>(j)));
    if (i == 0 && inputs == std::vector<std::string>{"input"})
      inputs.clear();  // the first node reads the model input by default
    copy->add(model.node_name(i), std::move(layer), inputs);
  }
  Rng rng(0);  // every value is overwritten below
  copy->create_params(host, model.dtype(), rng);
  copy->set_compute_precision(model.compute_precision());
  const std::vector<NamedParam> src = model.named_params(), dst = copy->named_params();
  LATHE_CHECK(src.size() == dst.size(), "int8_host_model: ", src.size(), " parameters copied into ", dst.size());
  for (size_t i = 0; i < src.size(); ++i) {
    LATHE_CHECK(src[i].name == dst[i].name, "int8_host_model: parameter ", src[i].name, " copied into ", dst[i].name);
    from.copy(src[i].param->value, dst[i].param->value);
  }
  const std::vector<NamedBuffer> bsrc = model.named_buffers(), bdst = copy->named_buffers();  // BatchNorm statistics
  LATHE_CHECK(bsrc.size() == bdst.size(), "int8_host_model: ", bsrc.size(), " buffers copied into ", bdst.size());
  for (size_t i = 0; i < bsrc.size(); ++i) {
    const Tensor& v = bsrc[i].buffer->value;
    if (v.device().is_cpu())
      v.copy_to(bdst[i].buffer->value);
    else
      from.copy(v, bdst[i].buffer->value);
  }
  from.synchronize();
  return copy;
}

}  // namespace lathe
