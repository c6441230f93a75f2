// ONNX -> Lathe Model: one pass over the (topologically ordered) nodes, each mapped onto a Lathe
// layer after its attributes are checked against what that layer computes exactly.
#include "engine/io/onnx/onnx_import.h"

#include <algorithm>
#include <map>
#include <set>

#include "engine/core/sha256.h"
#include "engine/io/onnx/onnx_proto.h"
#include "engine/nn/add.h"
#include "engine/nn/batchnorm2d.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/maxpool2d.h"
#include "engine/nn/model_io.h"
#include "engine/nn/relu.h"

namespace lathe {

const std::vector<std::string>& onnx_supported_ops() {
  static const std::vector<std::string> ops = {"Conv",
                                               "Gemm",
                                               "MatMul (+Add bias)",
                                               "Relu",
                                               "MaxPool",
                                               "BatchNormalization",
                                               "Add (two activations)",
                                               "Flatten (axis 1)",
                                               "Reshape (to [N, -1])",
                                               "Dropout",
                                               "Identity",
                                               "Softmax (last node only)",
                                               "Constant"};
  return ops;
}

namespace {

constexpr int64_t kMinOpset = 11, kMaxOpset = 17;
constexpr const char* kInput = "input";  // Model::add's name for the model input

std::string supported_list() {
  std::string s;
  for (const std::string& op : onnx_supported_ops())
    s += (s.empty() ? "" : ", ") + op;
  return s;
}

class Importer {
 public:
  Importer(const onnx::ModelProto& proto, const std::string& path) : m_proto(proto), m_path(path) {}

  OnnxImport run() {
    OnnxImport out;
    out.opset = check_opsets();
    const onnx::GraphProto& g = m_proto.graph();
    // Every op is known before anything else is looked at: an LSTM is named as such, whatever else.
    static const std::set<std::string> known = {"Constant",
                                                "Identity",
                                                "Relu",
                                                "Conv",
                                                "Gemm",
                                                "MatMul",
                                                "Add",
                                                "MaxPool",
                                                "Flatten",
                                                "Reshape",
                                                "Dropout",
                                                "Softmax",
                                                "BatchNormalization"};
    for (const onnx::NodeProto& n : g.node()) {
      if (!n.domain().empty() && n.domain() != "ai.onnx")
        refuse(n, "domain '" + n.domain() + "' is not supported; supported ops (default domain): " + supported_list());
      if (!known.count(n.op_type()))
        refuse(n, "op " + n.op_type() + " is not supported; supported ops: " + supported_list());
    }
    for (const onnx::TensorProto& t : g.initializer())
      m_init[t.name()] = &t;
    for (const onnx::NodeProto& n : g.node())
      for (const std::string& in : n.input())
        ++m_consumers[in];
    for (const onnx::ValueInfoProto& o : g.output())
      ++m_consumers[o.name()];
    m_model = std::make_unique<Model>(read_input());
    if (g.output_size() != 1)
      throw ConfigError(where() + "the graph has " + std::to_string(g.output_size()) +
                        " outputs; Lathe models have one (the class scores)");
    m_graph_output = g.output(0).name();
    for (int i = 0; i < g.node_size(); ++i)
      if (!m_skip.count(i))
        import_node(i);
    const auto out_it = m_tensor.find(m_graph_output);
    if (out_it == m_tensor.end() || out_it->second.node == kInput)
      throw ConfigError(where() + "the graph output '" + m_graph_output + "' is not computed by any supported node");
    if (m_model->size() == 0 || out_it->second.node != m_model->node_name(m_model->size() - 1))
      throw ConfigError(where() + "the graph output '" + m_graph_output + "' comes from node '" + out_it->second.node +
                        "', not from the last node; Lathe's model output is its last node");
    out.model = std::move(m_model);
    out.weights = std::move(m_weights);
    out.notes = std::move(m_notes);
    return out;
  }

 private:
  struct Value {
    std::string node;  // the Lathe node producing it, or kInput
    Shape shape;       // at batch 1
  };

  std::string where() const { return m_path + ": "; }
  std::string node_label(const onnx::NodeProto& n) const {
    return where() + "node '" + (n.name().empty() ? n.output(0) : n.name()) + "' (" + n.op_type() + ")";
  }
  [[noreturn]] void refuse(const onnx::NodeProto& n, const std::string& why) const {
    throw ConfigError(node_label(n) + ": " + why);
  }

  int64_t check_opsets() const {
    int64_t opset = -1;
    for (const onnx::OperatorSetIdProto& o : m_proto.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx")
        opset = o.version();
    if (opset < kMinOpset || opset > kMaxOpset)
      throw ConfigError(where() + "opset " + std::to_string(opset) +
                        " of the default ONNX domain; supported: " + std::to_string(kMinOpset) + " to " +
                        std::to_string(kMaxOpset) + " (re-export with opset_version=13, say)");
    return opset;
  }

  Shape read_input() {
    const onnx::GraphProto& g = m_proto.graph();
    const onnx::ValueInfoProto* input = nullptr;
    int count = 0;
    for (const onnx::ValueInfoProto& v : g.input())
      if (!m_init.count(v.name())) {
        input = &v;
        ++count;
      }
    if (count != 1)
      throw ConfigError(where() + "the graph has " + std::to_string(count) +
                        " inputs besides its initializers; Lathe models take one image batch");
    const onnx::TypeProto& type = input->type();
    if (!type.has_tensor_type() || type.tensor_type().elem_type() != onnx::TensorProto::FLOAT)
      throw ConfigError(where() + "input '" + input->name() + "' is not a FLOAT tensor");
    const onnx::TensorShapeProto& shape = type.tensor_type().shape();
    Shape sample;
    for (int i = 1; i < shape.dim_size(); ++i) {
      if (!shape.dim(i).has_dim_value() || shape.dim(i).dim_value() <= 0)
        throw ConfigError(where() + "input '" + input->name() + "' dimension " + std::to_string(i) +
                          " is not a fixed size; Lathe needs [N, C, H, W] or [N, features] with only N free");
      sample.push_back(shape.dim(i).dim_value());
    }
    if (shape.dim_size() != 4 && shape.dim_size() != 2)
      throw ConfigError(where() + "input '" + input->name() + "' has rank " + std::to_string(shape.dim_size()) +
                        "; Lathe takes [N, C, H, W] (NCHW) or [N, features]");
    Shape at_batch1 = {1};
    at_batch1.insert(at_batch1.end(), sample.begin(), sample.end());
    m_tensor[input->name()] = {kInput, at_batch1};
    return sample;
  }

  // The activation `name` feeds the node; refuses constants and unknown tensors.
  const Value& activation(const onnx::NodeProto& n, const std::string& name) const {
    auto it = m_tensor.find(name);
    if (it == m_tensor.end())
      refuse(n, m_init.count(name) || m_constants.count(name)
                    ? "input '" + name + "' is a constant where Lathe needs an activation"
                    : "input '" + name + "' is produced by no supported node");
    return it->second;
  }
  const onnx::TensorProto* constant(const std::string& name) const {
    if (auto it = m_init.find(name); it != m_init.end())
      return it->second;
    if (auto it = m_constants.find(name); it != m_constants.end())
      return it->second;
    return nullptr;
  }
  Tensor weight(const onnx::NodeProto& n, int input, const std::string& role) const {
    if (input >= n.input_size() || n.input(input).empty())
      refuse(n, "has no " + role + " input");
    const onnx::TensorProto* t = constant(n.input(input));
    if (!t)
      refuse(n, "its " + role + " '" + n.input(input) + "' is not an initializer; Lathe imports fixed weights only");
    return onnx_float_tensor(*t, node_label(n) + " " + role);
  }

  // Only the listed attributes may appear; `check` judges each present one.
  void allow_attributes(const onnx::NodeProto& n, const std::set<std::string>& allowed) const {
    for (const onnx::AttributeProto& a : n.attribute())
      if (!allowed.count(a.name())) {
        std::string list;
        for (const std::string& s : allowed)
          list += (list.empty() ? "" : ", ") + s;
        refuse(n, "attribute '" + a.name() + "' is not supported (supported: " + (list.empty() ? "none" : list) + ")");
      }
  }
  int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) const {
    const onnx::AttributeProto* a = onnx_attribute(n, name);
    return a ? a->i() : fallback;
  }
  double float_attr(const onnx::NodeProto& n, const std::string& name, double fallback) const {
    const onnx::AttributeProto* a = onnx_attribute(n, name);
    return a ? a->f() : fallback;
  }
  std::vector<int64_t> ints_attr(const onnx::NodeProto& n, const std::string& name) const {
    const onnx::AttributeProto* a = onnx_attribute(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }
  // One value for every entry of a 2-D window attribute (strides, pads, dilations), else refused.
  int64_t square(const onnx::NodeProto& n, const std::string& name, int64_t fallback, size_t count) const {
    const std::vector<int64_t> v = ints_attr(n, name);
    if (v.empty())
      return fallback;
    if (v.size() != count || std::any_of(v.begin(), v.end(), [&](int64_t x) { return x != v[0]; }))
      refuse(n, name + " must be " + std::to_string(count) + " equal values (Lathe's windows are square), got " +
                    std::to_string(v.size()) + " values");
    return v[0];
  }
  void require_notset_pad(const onnx::NodeProto& n) const {
    if (const onnx::AttributeProto* a = onnx_attribute(n, "auto_pad"); a && a->s() != "NOTSET" && a->s() != "VALID")
      refuse(n, "auto_pad \"" + a->s() + "\" is not supported (supported: NOTSET with explicit pads, VALID)");
  }
  void single_output(const onnx::NodeProto& n) const {
    for (int i = 1; i < n.output_size(); ++i)
      if (!n.output(i).empty() && m_consumers.count(n.output(i)))
        refuse(n, "output " + std::to_string(i) + " ('" + n.output(i) + "') is used; Lathe computes only the first");
  }

  std::string lathe_name(const onnx::NodeProto& n, int index, std::string weight_input = "") {
    if (const onnx::TensorProto* t = weight_input.empty() ? nullptr : constant(weight_input))
      weight_input = t->name();  // through Identity nodes to the initializer's own name
    std::string base;
    // PyTorch names weights "<module>.weight": the module path makes the state_dict names match.
    if (!weight_input.empty()) {
      const std::string suffix = ".weight";
      if (weight_input.size() > suffix.size() &&
          weight_input.compare(weight_input.size() - suffix.size(), suffix.size(), suffix) == 0)
        base = weight_input.substr(0, weight_input.size() - suffix.size());
    }
    if (base.empty() || m_used_names.count(base))
      base = n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
    if (base == kInput)
      base = "input_node";
    std::string name = base;
    for (int k = 2; m_used_names.count(name); ++k)
      name = base + "_" + std::to_string(k);
    m_used_names.insert(name);
    return name;
  }

  void add(const onnx::NodeProto& n, const std::string& name, std::unique_ptr<Layer> layer,
           const std::vector<const Value*>& inputs, const std::string& output) {
    std::vector<std::string> names;
    std::vector<Shape> shapes;
    for (const Value* v : inputs) {
      names.push_back(v->node);
      shapes.push_back(v->shape);
    }
    Shape shape;
    try {
      shape = layer->output_shape(shapes);
    } catch (const ConfigError& e) {
      refuse(n, e.what());
    }
    m_model->add(name, std::move(layer), names);
    m_tensor[output] = {name, shape};
  }
  void alias(const onnx::NodeProto& n, const std::string& input) { m_tensor[n.output(0)] = activation(n, input); }
  void put(const std::string& name, Tensor t) { m_weights.emplace_back(name, std::move(t)); }

  void import_node(int index) {
    const onnx::NodeProto& n = m_proto.graph().node(index);
    const std::string& op = n.op_type();
    if (op == "Constant") {
      allow_attributes(n, {"value"});
      const onnx::AttributeProto* a = onnx_attribute(n, "value");
      if (!a || !a->has_t())
        refuse(n, "only a tensor 'value' is supported");
      m_constants[n.output(0)] = &a->t();
    } else if (op == "Identity") {
      if (const onnx::TensorProto* c = constant(n.input(0)))  // PyTorch names shared weights this way
        m_constants[n.output(0)] = c;
      else
        alias(n, n.input(0));
    } else if (op == "Relu") {
      add(n, lathe_name(n, index), std::make_unique<ReLU>(), {&activation(n, n.input(0))}, n.output(0));
    } else if (op == "Conv") {
      import_conv(n, index);
    } else if (op == "Gemm") {
      import_gemm(n, index);
    } else if (op == "MatMul") {
      import_matmul(n, index);
    } else if (op == "Add") {
      allow_attributes(n, {});
      if (constant(n.input(0)) || constant(n.input(1)))
        refuse(n, "adding a constant is supported only as the bias right after a MatMul");
      add(n, lathe_name(n, index), std::make_unique<Add>(), {&activation(n, n.input(0)), &activation(n, n.input(1))},
          n.output(0));
    } else if (op == "MaxPool") {
      import_maxpool(n, index);
    } else if (op == "BatchNormalization") {
      import_batchnorm(n, index);
    } else if (op == "Flatten") {
      allow_attributes(n, {"axis"});
      if (int_attr(n, "axis", 1) != 1)
        refuse(n, "axis " + std::to_string(int_attr(n, "axis", 1)) + " is not supported (supported: 1)");
      add(n, lathe_name(n, index), std::make_unique<Flatten>(), {&activation(n, n.input(0))}, n.output(0));
    } else if (op == "Reshape") {
      import_reshape(n, index);
    } else if (op == "Dropout") {
      import_dropout(n, index);
    } else if (op == "Softmax") {
      allow_attributes(n, {"axis"});
      const Value& in = activation(n, n.input(0));
      const int64_t axis = int_attr(n, "axis", -1);  // 1 before opset 13: the same axis of [N, classes]
      if (n.output(0) != m_graph_output || in.shape.size() != 2 || (axis != 1 && axis != -1))
        refuse(n, "Softmax is supported only as the last node, over the class scores of [N, classes]");
      m_notes.push_back("the final Softmax '" + n.name() +
                        "' is left out: a Lathe model outputs the class scores (logits), its loss applies softmax");
      alias(n, n.input(0));
    } else {
      refuse(n, "op " + op + " is not supported; supported ops: " + supported_list());
    }
  }

  void import_conv(const onnx::NodeProto& n, int index) {
    allow_attributes(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
    require_notset_pad(n);
    if (int_attr(n, "group", 1) != 1)
      refuse(n, "group " + std::to_string(int_attr(n, "group", 1)) + " is not supported (supported: 1)");
    if (square(n, "dilations", 1, 2) != 1)
      refuse(n, "dilations other than 1 are not supported");
    const Value& x = activation(n, n.input(0));
    Tensor w = weight(n, 1, "weight");
    if (w.shape().size() != 4 || w.shape()[2] != w.shape()[3])
      refuse(n, "weight shape " + shape_str(w.shape()) + " is not supported (supported: [out, in, k, k], square)");
    const int64_t k = w.shape()[2];
    if (square(n, "kernel_shape", k, 2) != k)
      refuse(n, "kernel_shape does not match the weight's " + shape_str(w.shape()));
    const int64_t stride = square(n, "strides", 1, 2), pad = square(n, "pads", 0, 4);
    const bool bias = n.input_size() > 2 && !n.input(2).empty();
    if (x.shape.size() != 4 || x.shape[1] != w.shape()[1])
      refuse(n, "input " + shape_str(x.shape) + " does not match the weight " + shape_str(w.shape()));
    const std::string name = lathe_name(n, index, n.input(1));
    add(n, name, std::make_unique<Conv2d>(w.shape()[1], w.shape()[0], k, stride, pad, bias), {&x}, n.output(0));
    put(name + ".weight", std::move(w));
    if (bias)
      put(name + ".bias", bias_vector(n, 2));
  }

  // A bias initializer of shape [out] or [1, out], as [out].
  Tensor bias_vector(const onnx::NodeProto& n, int input) const {
    Tensor b = weight(n, input, "bias");
    const Shape& s = b.shape();
    if (!(s.size() == 1 || (s.size() == 2 && s[0] == 1)))
      refuse(n, "bias shape " + shape_str(s) + " is not supported (supported: [out] or [1, out])");
    return b.view({b.numel()});
  }

  void add_linear(const onnx::NodeProto& n, const std::string& name, const Value& x, Tensor w, Tensor* b,
                  const std::string& output) {
    if (x.shape.size() != 2 || x.shape[1] != w.shape()[1])
      refuse(n, "input " + shape_str(x.shape) + " does not match the weight [out, in] = " + shape_str(w.shape()) +
                    " (a Linear needs [N, in]: Flatten first)");
    if (b && b->numel() != w.shape()[0])
      refuse(n, "bias of " + std::to_string(b->numel()) + " values for " + std::to_string(w.shape()[0]) + " outputs");
    add(n, name, std::make_unique<Linear>(w.shape()[1], w.shape()[0], b != nullptr), {&x}, output);
    put(name + ".weight", std::move(w));
    if (b)
      put(name + ".bias", std::move(*b));
  }

  static Tensor transposed(const Tensor& w) {
    Tensor t = Tensor::empty({w.shape()[1], w.shape()[0]}, DType::f32);
    for (int64_t i = 0; i < w.shape()[0]; ++i)
      for (int64_t j = 0; j < w.shape()[1]; ++j)
        t.data<float>()[j * w.shape()[0] + i] = w.data<float>()[i * w.shape()[1] + j];
    return t;
  }

  void import_gemm(const onnx::NodeProto& n, int index) {
    allow_attributes(n, {"alpha", "beta", "transA", "transB"});
    if (float_attr(n, "alpha", 1) != 1 || float_attr(n, "beta", 1) != 1)
      refuse(n, "alpha and beta must be 1 (got " + std::to_string(float_attr(n, "alpha", 1)) + ", " +
                    std::to_string(float_attr(n, "beta", 1)) + ")");
    if (int_attr(n, "transA", 0) != 0)
      refuse(n, "transA 1 is not supported (supported: 0)");
    const Value& x = activation(n, n.input(0));
    Tensor w = weight(n, 1, "weight");
    if (w.shape().size() != 2)
      refuse(n, "weight shape " + shape_str(w.shape()) + " is not 2-D");
    if (int_attr(n, "transB", 0) == 0)
      w = transposed(w);  // B is [in, out]; Lathe's Linear holds [out, in] as PyTorch
    const bool has_bias = n.input_size() > 2 && !n.input(2).empty();
    Tensor b = has_bias ? bias_vector(n, 2) : Tensor();
    add_linear(n, lathe_name(n, index, n.input(1)), x, std::move(w), has_bias ? &b : nullptr, n.output(0));
  }

  void import_matmul(const onnx::NodeProto& n, int index) {
    allow_attributes(n, {});
    const Value& x = activation(n, n.input(0));
    Tensor w = weight(n, 1, "weight");
    if (w.shape().size() != 2)
      refuse(n, "the second input must be a 2-D initializer [in, out], got " + shape_str(w.shape()));
    w = transposed(w);
    // MatMul followed by Add(constant) is PyTorch's Linear in some exports: one Linear with bias.
    const onnx::GraphProto& g = m_proto.graph();
    if (m_consumers[n.output(0)] == 1)
      for (int j = index + 1; j < g.node_size(); ++j) {
        const onnx::NodeProto& next = g.node(j);
        if (next.op_type() != "Add" || next.input_size() != 2)
          continue;
        const int self = next.input(0) == n.output(0) ? 0 : next.input(1) == n.output(0) ? 1 : -1;
        if (self < 0 || !constant(next.input(1 - self)))
          continue;
        Tensor b = bias_vector(next, 1 - self);
        m_skip.insert(j);
        add_linear(n, lathe_name(n, index, n.input(1)), x, std::move(w), &b, next.output(0));
        return;
      }
    add_linear(n, lathe_name(n, index, n.input(1)), x, std::move(w), nullptr, n.output(0));
  }

  void import_maxpool(const onnx::NodeProto& n, int index) {
    allow_attributes(n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
    require_notset_pad(n);
    single_output(n);
    if (int_attr(n, "ceil_mode", 0) != 0)
      refuse(n, "ceil_mode 1 is not supported (supported: 0)");
    if (square(n, "dilations", 1, 2) != 1)
      refuse(n, "dilations other than 1 are not supported");
    if (ints_attr(n, "kernel_shape").empty())
      refuse(n, "needs kernel_shape");
    const int64_t k = square(n, "kernel_shape", 0, 2), stride = square(n, "strides", 1, 2),
                  pad = square(n, "pads", 0, 4);
    if (pad * 2 > k)
      refuse(n, "pads " + std::to_string(pad) + " for kernel " + std::to_string(k) +
                    " is not supported (supported: pads <= kernel / 2)");
    add(n, lathe_name(n, index), std::make_unique<MaxPool2d>(k, stride, pad), {&activation(n, n.input(0))},
        n.output(0));
  }

  void import_batchnorm(const onnx::NodeProto& n, int index) {
    allow_attributes(n, {"epsilon", "momentum", "training_mode"});
    single_output(n);
    if (int_attr(n, "training_mode", 0) != 0)
      refuse(n, "training_mode 1 is not supported (export the model in eval mode)");
    const Value& x = activation(n, n.input(0));
    if (x.shape.size() != 4)
      refuse(n, "input " + shape_str(x.shape) + " is not supported (supported: [N, C, H, W])");
    const int64_t c = x.shape[1];
    const char* roles[] = {"weight", "bias", "running_mean", "running_var"};
    std::vector<Tensor> t;
    for (int i = 0; i < 4; ++i) {
      t.push_back(weight(n, i + 1, roles[i]));
      if (t.back().shape() != Shape{c})
        refuse(n, std::string(roles[i]) + " has shape " + shape_str(t.back().shape()) + ", expected [" +
                      std::to_string(c) + "]");
    }
    // ONNX's momentum weighs the running value (0.9), PyTorch's and Lathe's the batch value (0.1).
    const double momentum = 1 - float_attr(n, "momentum", 0.9);
    const double eps = float_attr(n, "epsilon", 1e-5);
    const std::string name = lathe_name(n, index, n.input(1));
    add(n, name, std::make_unique<BatchNorm2d>(c, eps, momentum), {&x}, n.output(0));
    for (int i = 0; i < 4; ++i)
      put(name + "." + roles[i], std::move(t[static_cast<size_t>(i)]));
    put(name + ".num_batches_tracked", Tensor::zeros({1}, DType::f32));
  }

  void import_reshape(const onnx::NodeProto& n, int index) {
    allow_attributes(n, {"allowzero"});
    const Value& x = activation(n, n.input(0));
    const onnx::TensorProto* s = n.input_size() > 1 ? constant(n.input(1)) : nullptr;
    if (!s)
      refuse(n, "the target shape must be a constant (an initializer or a Constant node)");
    const std::vector<int64_t> v = onnx_int64_values(*s, node_label(n) + " shape");
    int64_t rest = 1;
    for (size_t i = 1; i < x.shape.size(); ++i)
      rest *= x.shape[i];
    // [N, rest] for any batch N: the first entry copies N (0) or is inferred (-1 with rest given).
    // allowzero = 1 makes a 0 a real zero-sized dimension, not a copy of N (torch.onnx sets it).
    const bool copies_n = v.size() == 2 && v[0] == 0 && int_attr(n, "allowzero", 0) == 0;
    const bool flat = v.size() == 2 && ((copies_n && (v[1] == -1 || v[1] == rest)) || (v[0] == -1 && v[1] == rest));
    if (!flat) {
      std::string text;
      for (int64_t d : v)
        text += (text.empty() ? "" : ", ") + std::to_string(d);
      refuse(n, "reshaping " + shape_str(x.shape) + " to [" + text + "] is not supported (supported: [0, -1], [-1, " +
                    std::to_string(rest) + "] or [0, " + std::to_string(rest) + "], a flatten to [N, features])");
    }
    add(n, lathe_name(n, index), std::make_unique<Flatten>(), {&x}, n.output(0));
  }

  void import_dropout(const onnx::NodeProto& n, int index) {
    allow_attributes(n, {"seed", "ratio"});
    single_output(n);
    double ratio = float_attr(n, "ratio", 0.5);
    if (n.input_size() > 1 && !n.input(1).empty()) {
      const onnx::TensorProto* r = constant(n.input(1));
      if (!r)
        refuse(n, "the ratio must be a constant");
      ratio = onnx_float_tensor(*r, node_label(n) + " ratio").at_flat(0);
    }
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const onnx::TensorProto* t = constant(n.input(2));
      if (!t || t->data_type() != onnx::TensorProto::BOOL || (t->int32_data_size() && t->int32_data(0)) ||
          (t->has_raw_data() && !t->raw_data().empty() && t->raw_data()[0]))
        refuse(n, "training_mode must be a constant false");
    }
    add(n, lathe_name(n, index), std::make_unique<Dropout>(ratio), {&activation(n, n.input(0))}, n.output(0));
  }

  const onnx::ModelProto& m_proto;
  std::string m_path;
  std::unique_ptr<Model> m_model;
  std::map<std::string, const onnx::TensorProto*> m_init, m_constants;
  std::map<std::string, int> m_consumers;
  std::map<std::string, Value> m_tensor;
  std::set<std::string> m_used_names;
  std::set<int> m_skip;
  std::string m_graph_output;
  std::vector<std::pair<std::string, Tensor>> m_weights;
  std::vector<std::string> m_notes;
};

}  // namespace

OnnxImport import_onnx(const std::string& path) {
  const onnx::ModelProto proto = read_onnx_file(path);
  OnnxImport out = Importer(proto, path).run();
  out.path = path;
  out.sha256 = sha256_file(path);
  return out;
}

void check_onnx_input(const Model& model, const Shape& image_shape) {
  const Shape& in = model.input_shape();
  if (in == image_shape || in == Shape{shape_numel(image_shape)})
    return;
  throw ConfigError("the ONNX model takes input " + shape_str(in) + " per sample, the dataset's images are " +
                    shape_str(image_shape) + " (C, H, W)");
}

void load_onnx_weights(Model& model, Backend& backend, const OnnxImport& imported) {
  load_named_tensors(model, backend, imported.weights, imported.path);
}

}  // namespace lathe
