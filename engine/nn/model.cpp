// Model graph execution: shape inference at add(), cached activation/gradient buffers, reverse-order
// backward with gradient summation where a node feeds several others.
#include "engine/nn/model.h"

#include <sstream>

namespace lathe {

Model::Model(Shape input_shape) : m_input_shape(std::move(input_shape)) {
  LATHE_CHECK(!m_input_shape.empty(), "model input shape must not be empty");
}

int Model::find(const std::string& name) const {
  auto it = m_index.find(name);
  return it == m_index.end() ? -2 : it->second;
}

int Model::add(const std::string& name, std::unique_ptr<Layer> layer, std::vector<std::string> inputs) {
  if (m_index.count(name))
    throw ConfigError("model: duplicate layer name '" + name + "'");
  LATHE_CHECK(!m_created, "model: add() after create_params()");
  Node node;
  node.name = name;
  if (inputs.empty()) {
    node.inputs.push_back(m_nodes.empty() ? kModelInput : static_cast<int>(m_nodes.size()) - 1);
  } else {
    for (const std::string& in : inputs) {
      if (in == "input") {
        node.inputs.push_back(kModelInput);
        continue;
      }
      const int j = find(in);
      if (j < 0)
        throw ConfigError("model: layer '" + name + "' takes input '" + in + "', which is not an earlier layer");
      node.inputs.push_back(j);
    }
  }
  if (static_cast<int>(node.inputs.size()) != layer->num_inputs())
    throw ConfigError("model: layer '" + name + "' (" + layer->kind() + ") needs " +
                      std::to_string(layer->num_inputs()) + " input(s), got " + std::to_string(node.inputs.size()));
  std::vector<Shape> in_shapes;
  for (int j : node.inputs)
    in_shapes.push_back(batch_shape(j, 1));
  try {
    node.sample_shape = layer->output_shape(in_shapes);
  } catch (const ConfigError& e) {
    throw ConfigError("model: layer '" + name + "': " + e.what());
  }
  node.layer = std::move(layer);
  m_index[name] = static_cast<int>(m_nodes.size());
  m_nodes.push_back(std::move(node));
  return static_cast<int>(m_nodes.size()) - 1;
}

Shape Model::batch_shape(int node, int64_t batch) const {
  Shape s;
  if (node == kModelInput) {
    s.push_back(batch);
    s.insert(s.end(), m_input_shape.begin(), m_input_shape.end());
  } else {
    s = m_nodes.at(node).sample_shape;
    s[0] = batch;
  }
  return s;
}

void Model::set_compute_precision(DType precision) {
  LATHE_CHECK(precision == DType::f32 || precision == DType::bf16 || precision == DType::f16,
              "compute precision must be f32, bf16 or f16, got ", dtype_name(precision));
  for (Node& n : m_nodes)
    n.layer->set_compute_precision(precision);
  m_compute_precision = precision;
}

void Model::create_params(Backend& backend, DType dtype, Rng& rng) {
  LATHE_CHECK(!m_nodes.empty(), "model has no layers");
  m_dtype = dtype;
  for (Node& n : m_nodes)
    n.layer->create_params(backend, dtype, rng);
  m_outputs.assign(m_nodes.size(), Tensor());
  m_diffs.assign(m_nodes.size(), Tensor());
  m_temps.assign(m_nodes.size(), Tensor());
  m_diff_ready.assign(m_nodes.size(), 0);
  m_fused_relu_of.assign(m_nodes.size(), -1);
  m_relu_folded.assign(m_nodes.size(), 0);
  if (m_fuse_relu) {
    const std::vector<std::vector<int>> users = consumers();
    for (size_t r = 0; r < m_nodes.size(); ++r) {
      const Node& n = m_nodes[r];
      if (n.layer->kind() != "relu" || n.inputs[0] == kModelInput)
        continue;
      const int p = n.inputs[0];
      if (users[p].size() != 1 || !m_nodes[p].layer->can_fuse_relu() || m_fused_relu_of[p] >= 0)
        continue;
      m_nodes[p].layer->set_fused_relu(true);
      m_fused_relu_of[p] = static_cast<int>(r);
    }
    for (size_t r = 0; r < m_nodes.size(); ++r) {
      const Node& n = m_nodes[r];
      if (n.layer->kind() != "relu" || n.inputs[0] == kModelInput || users[n.inputs[0]].size() != 1 ||
          users[r].size() != 1)
        continue;
      Node& q = m_nodes[users[r][0]];
      if (q.inputs.size() != 1 || !q.layer->can_mask_input_relu())
        continue;
      q.layer->set_input_relu(true);
      m_relu_folded[r] = 1;
    }
  }
  m_created = true;
}

std::unique_ptr<Layer> Model::replace_layer(size_t i, std::unique_ptr<Layer> layer) {
  LATHE_CHECK(m_created && i < m_nodes.size() && layer, "model: replace_layer(", i,
              ") needs create_params() and a layer");
  Node& n = m_nodes[i];
  std::vector<Shape> in_shapes;
  for (int j : n.inputs)
    in_shapes.push_back(batch_shape(j, 1));
  LATHE_CHECK(layer->num_inputs() == n.layer->num_inputs() && layer->output_shape(in_shapes) == n.sample_shape,
              "model: replace_layer: ", layer->describe(), " does not fit node '", n.name, "' (", n.layer->describe(),
              ")");
  if (m_fused_relu_of[i] >= 0) {
    LATHE_CHECK(layer->can_fuse_relu(), "model: replace_layer: ", layer->describe(), " cannot take the fused ReLU of '",
                n.name, "'");
    layer->set_fused_relu(true);
  }
  if (m_relu_folded[i] && layer->kind() != "relu") {  // no ReLU here any more: its consumer masks nothing
    m_relu_folded[i] = 0;
    for (Node& q : m_nodes)
      if (q.inputs.size() == 1 && q.inputs[0] == static_cast<int>(i))
        q.layer->set_input_relu(false);
  }
  for (int j : n.inputs)  // a ReLU whose backward the old layer applied
    if (j != kModelInput && m_relu_folded[j]) {
      if (layer->can_mask_input_relu())
        layer->set_input_relu(true);
      else
        m_relu_folded[j] = 0;
    }
  std::swap(n.layer, layer);
  return layer;
}

const Tensor& Model::input_of(int index, const Tensor& model_input) const {
  return index == kModelInput ? model_input : m_outputs[index];
}

namespace {
/// Reuses `t` when it already has this shape, dtype and layout; reallocates otherwise.
void ensure(Backend& backend, Tensor& t, const Shape& shape, DType dtype, MemoryFormat fmt) {
  if (t.defined() && t.shape() == shape && t.dtype() == dtype && t.format() == fmt && t.device() == backend.device())
    return;
  t = backend.empty(shape, dtype, fmt);
}
}  // namespace

std::vector<std::vector<int>> Model::consumers() const {
  std::vector<std::vector<int>> users(m_nodes.size());
  for (size_t i = 0; i < m_nodes.size(); ++i)
    for (int j : m_nodes[i].inputs)
      if (j != kModelInput)
        users[j].push_back(static_cast<int>(i));
  return users;
}

void Model::plan_activation_dtypes(const Backend& backend) {
  using Io = Layer::LowPrecisionIo;
  const size_t n = m_nodes.size();
  m_act_dtype.assign(n, m_dtype);
  const DType low = m_compute_precision;
  if (!m_low_precision_activations || low == DType::f32 || m_dtype != DType::f32)
    return;
  std::vector<Io> io(n);
  for (size_t i = 0; i < n; ++i)
    io[i] = m_nodes[i].layer->low_precision_io(backend, low);
  const std::vector<std::vector<int>> consumers = this->consumers();
  // Candidates: written by a layer that can, read by exactly one layer that can (one consumer, so
  // no gradient sums at low precision), not the model output. A pass-through layer cannot change
  // the dtype, so its input and output are stored alike: drop both until nothing changes.
  std::vector<char> low_out(n, 0);
  for (size_t i = 0; i + 1 < n; ++i) {
    const bool writes = io[i] == Io::converts || (io[i] == Io::passes_through && m_nodes[i].inputs[0] != kModelInput);
    low_out[i] = writes && consumers[i].size() == 1 && io[consumers[i][0]] != Io::none;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (io[i] != Io::passes_through)
        continue;
      const int in = m_nodes[i].inputs[0];
      const bool in_low = in != kModelInput && low_out[in];
      if (in_low != static_cast<bool>(low_out[i])) {
        low_out[i] = 0;
        if (in != kModelInput)
          low_out[in] = 0;
        changed = true;
      }
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (low_out[i])
      m_act_dtype[i] = low;
}

const Tensor& Model::forward(LayerContext& ctx, const Tensor& input) {
  LATHE_CHECK(m_created, "model: forward() before create_params()");
  plan_activation_dtypes(ctx.backend);
  const int64_t batch = input.dim(0);
  const Shape want = batch_shape(kModelInput, batch);
  if (input.shape() == want) {
    m_input_view = input;
  } else {
    LATHE_CHECK(input.numel() == shape_numel(want) && input.is_contiguous(), "model input ", input.describe(),
                " does not fit the model's input shape ", shape_str(want));
    m_input_view = input.view(want);
  }
  std::vector<const Tensor*> srcs;
  for (size_t i = 0; i < m_nodes.size(); ++i) {
    Node& n = m_nodes[i];
    if (n.inputs[0] != kModelInput && m_fused_relu_of[n.inputs[0]] == static_cast<int>(i)) {
      m_outputs[i] = m_outputs[n.inputs[0]];  // the producer already applied this ReLU
      continue;
    }
    srcs.clear();
    for (int j : n.inputs)
      srcs.push_back(&input_of(j, m_input_view));
    ensure(ctx.backend, m_outputs[i], batch_shape(static_cast<int>(i), batch), m_act_dtype[i],
           n.layer->output_format(ctx.backend, srcs));
    n.layer->forward(ctx, srcs, m_outputs[i]);
  }
  return m_outputs.back();
}

void Model::backward(LayerContext& ctx, const Tensor& diff_output) { backward(ctx, diff_output, {}); }

void Model::backward(LayerContext& ctx, const Tensor& diff_output,
                     const std::vector<std::pair<int, const Tensor*>>& extra) {
  LATHE_CHECK(diff_output.shape() == m_outputs.back().shape(), "model backward: gradient ", diff_output.describe(),
              " does not match output ", m_outputs.back().describe());
  std::fill(m_diff_ready.begin(), m_diff_ready.end(), 0);
  const size_t last = m_nodes.size() - 1;
  std::vector<const Tensor*> srcs;
  std::vector<Tensor*> diff_srcs;
  for (size_t ii = m_nodes.size(); ii-- > 0;) {
    Node& n = m_nodes[ii];
    const Tensor* diff_dst = ii == last ? &diff_output : (m_diff_ready[ii] ? &m_diffs[ii] : nullptr);
    bool had_extra = false;
    for (const auto& [node, extra_diff] : extra) {  // gradients entering here from outside the graph
      if (node != static_cast<int>(ii))
        continue;
      LATHE_CHECK(extra_diff->shape() == m_outputs[ii].shape() && extra_diff->format() == m_outputs[ii].format() &&
                      extra_diff->dtype() == m_outputs[ii].dtype(),
                  "model backward: extra gradient ", extra_diff->describe(), " for '", n.name,
                  "' does not match its output ", m_outputs[ii].describe());
      if (diff_dst && diff_dst != &m_diffs[ii]) {
        ensure(ctx.backend, m_diffs[ii], m_outputs[ii].shape(), m_outputs[ii].dtype(), m_outputs[ii].format());
        ctx.backend.copy(*diff_dst, m_diffs[ii]);
      }
      if (diff_dst) {
        ctx.backend.axpy(1.0, *extra_diff, m_diffs[ii]);
      } else {
        ensure(ctx.backend, m_diffs[ii], m_outputs[ii].shape(), m_outputs[ii].dtype(), m_outputs[ii].format());
        ctx.backend.copy(*extra_diff, m_diffs[ii]);
      }
      diff_dst = &m_diffs[ii];
      had_extra = true;
    }
    if (m_relu_folded[ii] && diff_dst == &m_diffs[ii]) {
      // The consumer applied this ReLU's mask: its gradient is the gradient at the ReLU's input,
      // unless a gradient entered here from outside (then the ReLU's backward runs).
      const int p = n.inputs[0];
      const Tensor& g = m_diffs[ii];
      const Tensor& in = m_outputs[p];
      if (!had_extra && !m_diff_ready[p] && g.shape() == in.shape() && g.dtype() == in.dtype() &&
          g.strides() == in.strides()) {
        m_diffs[p] = g;  // shares the storage
        m_diff_ready[p] = 1;
        continue;
      }
      if (m_diffs[p].defined() && m_diffs[p].raw() == g.raw())  // not this time: a buffer of its own
        m_diffs[p] = Tensor();
    }
    if (!diff_dst) {  // output unused downstream: no gradient flows here
      for (Param* p : n.layer->params()) {
        ctx.backend.fill_zero(p->grad);
        if (m_grad_ready)
          m_grad_ready(p);
      }
      continue;
    }
    srcs.clear();
    diff_srcs.clear();
    std::vector<int> accumulate_into;  // inputs whose gradient goes to a temp, then is added
    for (int j : n.inputs) {
      srcs.push_back(&input_of(j, m_input_view));
      if (j == kModelInput) {
        diff_srcs.push_back(nullptr);
        continue;
      }
      const Tensor& out = m_outputs[j];
      if (!m_diff_ready[j]) {
        ensure(ctx.backend, m_diffs[j], out.shape(), out.dtype(), out.format());
        diff_srcs.push_back(&m_diffs[j]);
      } else {
        ensure(ctx.backend, m_temps[j], out.shape(), out.dtype(), out.format());
        diff_srcs.push_back(&m_temps[j]);
        accumulate_into.push_back(j);
      }
    }
    n.layer->backward(ctx, srcs, m_outputs[ii], *diff_dst, diff_srcs);
    if (m_grad_ready)
      for (Param* p : n.layer->params())
        m_grad_ready(p);
    for (int j : n.inputs)
      if (j != kModelInput)
        m_diff_ready[j] = 1;
    for (int j : accumulate_into)
      ctx.backend.axpy(1.0, m_temps[j], m_diffs[j]);
  }
}

const Tensor& Model::activation(const std::string& name) const {
  if (name == "input")
    return m_input_view;
  const int i = find(name);
  if (i < 0)
    throw ConfigError("model has no layer named '" + name + "'");
  if (!m_fused_relu_of.empty() && m_fused_relu_of[i] >= 0)
    throw ConfigError("layer '" + name + "' is fused with the ReLU '" + m_nodes[m_fused_relu_of[i]].name +
                      "' after it, so only its activated output exists: tap '" + m_nodes[m_fused_relu_of[i]].name +
                      "' (or build the model with set_fuse_relu(false))");
  LATHE_CHECK(m_outputs.size() > static_cast<size_t>(i) && m_outputs[i].defined(), "activation '", name,
              "' read before any forward pass");
  if (m_outputs[i].dtype() != m_dtype)
    throw ConfigError("activation '" + name + "' is stored in " + std::string(dtype_name(m_outputs[i].dtype())) +
                      " (mixed-precision activations): call set_low_precision_activations(false) before the forward "
                      "pass to read it in " +
                      std::string(dtype_name(m_dtype)));
  return m_outputs[i];
}

std::vector<NamedParam> Model::named_params() {
  std::vector<NamedParam> out;
  for (Node& n : m_nodes)
    for (Param* p : n.layer->params())
      out.push_back({n.name + "." + p->name, p});
  return out;
}

std::vector<NamedBuffer> Model::named_buffers() {
  std::vector<NamedBuffer> out;
  for (Node& n : m_nodes)
    for (Buffer* b : n.layer->buffers())
      out.push_back({n.name + "." + b->name, b});
  return out;
}

std::vector<LayerInfo> Model::layer_infos() const {
  std::vector<LayerInfo> infos;
  for (size_t i = 0; i < m_nodes.size(); ++i) {
    const Node& n = m_nodes[i];
    LayerInfo info;
    info.name = n.name;
    info.description = n.layer->describe();
    info.output_shape = n.sample_shape;
    std::vector<Shape> in_shapes;
    for (int j : n.inputs)
      in_shapes.push_back(batch_shape(j, 1));
    info.flops = n.layer->flops_per_sample(in_shapes);
    for (Param* p : const_cast<Layer&>(*n.layer).params()) {
      if (!p->value.defined())
        continue;  // before create_params()
      info.params += p->value.numel();
      info.param_bytes += static_cast<int64_t>(p->value.nbytes());
    }
    infos.push_back(info);
  }
  return infos;
}

int64_t Model::param_count() const {
  int64_t n = 0;
  for (const LayerInfo& i : layer_infos())
    n += i.params;
  return n;
}

int64_t Model::param_bytes() const {
  int64_t n = 0;
  for (const LayerInfo& i : layer_infos())
    n += i.param_bytes;
  return n;
}

int64_t Model::flops_per_sample() const {
  int64_t n = 0;
  for (const LayerInfo& i : layer_infos())
    n += i.flops;
  return n;
}

std::string Model::summary() const {
  std::ostringstream os;
  int64_t params = 0, flops = 0;
  for (const LayerInfo& i : layer_infos()) {
    os << "  " << i.name << ": " << i.description << " -> " << shape_str(i.output_shape);
    if (i.params)
      os << ", " << i.params << " params";
    if (i.flops)
      os << ", " << i.flops << " FLOPs";
    os << "\n";
    params += i.params;
    flops += i.flops;
  }
  os << "  total: " << params << " params, " << flops << " forward FLOPs per sample\n";
  return os.str();
}

}  // namespace lathe
