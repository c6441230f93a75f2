// Lathe Model -> ONNX: each layer kind written as the ONNX op computing the same thing.
#include "engine/io/onnx/onnx_export.h"

#include <filesystem>

#include "engine/core/file_write.h"
#include "engine/io/onnx/onnx_proto.h"
#include "engine/nn/batchnorm2d.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/maxpool2d.h"

namespace lathe {

namespace {

void set_ints(onnx::NodeProto* node, const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values)
    a->add_ints(v);
}
void set_int(onnx::NodeProto* node, const std::string& name, int64_t value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}
void set_float(onnx::NodeProto* node, const std::string& name, double value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(value));
}

void set_value_info(onnx::ValueInfoProto* v, const std::string& name, const Shape& sample_shape) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* s = t->mutable_shape();
  s->add_dim()->set_dim_param("N");
  for (int64_t d : sample_shape)
    s->add_dim()->set_dim_value(d);
}

Tensor scalar_tensor(float v) {
  Tensor t = Tensor::empty({}, DType::f32);
  t.data<float>()[0] = v;
  return t;
}

class Exporter {
 public:
  Exporter(Model& model, Backend& backend, const QdqPlan* qdq) : m_model(model), m_backend(backend), m_qdq(qdq) {
    for (const NamedParam& p : model.named_params())
      m_state[p.name] = &p.param->value;
    for (const NamedBuffer& b : model.named_buffers())
      m_state[b.name] = &b.buffer->value;
  }

  onnx::ModelProto run(const OnnxExportOptions& options) {
    onnx::ModelProto proto;
    proto.set_ir_version(8);  // ONNX 1.12's IR; opsets 13-17 need >= 7
    proto.set_producer_name("lathe");
    proto.set_producer_version(LATHE_VERSION);
    onnx::OperatorSetIdProto* opset = proto.add_opset_import();
    opset->set_domain("");
    opset->set_version(options.opset);
    for (const auto& [key, value] : options.metadata) {
      onnx::StringStringEntryProto* e = proto.add_metadata_props();
      e->set_key(key);
      e->set_value(value);
    }
    m_graph = proto.mutable_graph();
    m_graph->set_name(options.graph_name);
    set_value_info(m_graph->add_input(), "input", m_model.input_shape());
    if (m_qdq)
      check_plan();
    quantize_value("input");
    for (size_t i = 0; i < m_model.size(); ++i)
      export_node(i);
    const std::string last = m_model.node_name(m_model.size() - 1);
    const LayerInfo info = m_model.layer_infos().back();
    Shape out_sample(info.output_shape.begin() + 1, info.output_shape.end());
    set_value_info(m_graph->add_output(), last, out_sample);
    return proto;
  }

 private:
  std::string input_name(size_t i, size_t k) const {
    const int j = m_model.node_inputs(i).at(k);
    return read(j == Model::kModelInput ? "input" : m_model.node_name(static_cast<size_t>(j)));
  }
  /// The tensor a reader of Lathe's value `name` reads (its dequantized form where it is quantized).
  std::string read(const std::string& name) const {
    const auto it = m_read.find(name);
    return it == m_read.end() ? name : it->second;
  }

  void check_plan() const {
    for (const auto& [name, layer] : m_qdq->layers) {
      const int i = m_model.find(name);
      if (i < 0 || (m_model.layer(i).kind() != "linear" && m_model.layer(i).kind() != "conv2d"))
        throw ConfigError("ONNX QDQ export: INT8 layer '" + name + "' is not a linear or conv2d node of the model");
      const int bn = layer.folded_bn.empty() ? 0 : m_model.find(layer.folded_bn);
      if (bn < 0 || (!layer.folded_bn.empty() && m_model.layer(bn).kind() != "batchnorm2d"))
        throw ConfigError("ONNX QDQ export: '" + layer.folded_bn + "' folded into '" + name +
                          "' is not a batchnorm2d node of the model");
      LATHE_CHECK(layer.weight_q.dtype() == DType::s8 &&
                      layer.weight_q.dim(0) == static_cast<int64_t>(layer.weight_scale.size()),
                  "ONNX QDQ export: weights of '", name, "' must be s8 [O, ...] with O scales, got ",
                  layer.weight_q.describe(), " and ", layer.weight_scale.size(), " scales");
    }
    for (const auto& [name, p] : m_qdq->values)
      if (p.per_channel() || p.bits != 8)
        throw ConfigError("ONNX QDQ export: value '" + name + "' must be quantized 8-bit per tensor, got " +
                          p.describe());
  }

  /// QuantizeLinear -> DequantizeLinear on Lathe's value `name` when the plan quantizes it; its
  /// readers then read the dequantized tensor.
  void quantize_value(const std::string& name) {
    if (!m_qdq)
      return;
    const auto it = m_qdq->values.find(name);
    if (it == m_qdq->values.end())
      return;
    const QuantParams& p = it->second;
    fill_onnx_float_tensor(name + ".act_scale", scalar_tensor(p.scale[0]), m_graph->add_initializer());
    Tensor zp = Tensor::empty({}, p.is_signed ? DType::s8 : DType::u8);
    if (p.is_signed)
      zp.data<int8_t>()[0] = static_cast<int8_t>(p.zero_point[0]);
    else
      zp.data<uint8_t>()[0] = static_cast<uint8_t>(p.zero_point[0]);
    fill_onnx_int8_tensor(name + ".act_zero_point", zp, m_graph->add_initializer());
    onnx::NodeProto* q = m_graph->add_node();
    q->set_name(name + "/QuantizeLinear");
    q->set_op_type("QuantizeLinear");
    q->add_input(read(name));
    q->add_input(name + ".act_scale");
    q->add_input(name + ".act_zero_point");
    q->add_output(name + "_q");
    onnx::NodeProto* dq = m_graph->add_node();
    dq->set_name(name + "/DequantizeLinear");
    dq->set_op_type("DequantizeLinear");
    dq->add_input(name + "_q");
    dq->add_input(name + ".act_scale");
    dq->add_input(name + ".act_zero_point");
    dq->add_output(name + "_dq");
    m_read[name] = name + "_dq";
  }

  /// An INT8 layer's weights: int8 initializer -> DequantizeLinear (per channel, axis 0), a node
  /// written before the layer's (the graph is topologically sorted).
  void add_qdq_weights(const std::string& name, const QdqLayer& L) {
    fill_onnx_int8_tensor(name + ".weight_q", L.weight_q, m_graph->add_initializer());
    const int64_t O = L.weight_q.dim(0);
    Tensor scale = Tensor::empty({O}, DType::f32);
    std::copy(L.weight_scale.begin(), L.weight_scale.end(), scale.data<float>());
    fill_onnx_float_tensor(name + ".weight_scale", scale, m_graph->add_initializer());
    fill_onnx_int8_tensor(name + ".weight_zero_point", Tensor::zeros({O}, DType::s8), m_graph->add_initializer());
    onnx::NodeProto* dq = m_graph->add_node();
    dq->set_name(name + "/weight/DequantizeLinear");
    dq->set_op_type("DequantizeLinear");
    dq->add_input(name + ".weight_q");
    dq->add_input(name + ".weight_scale");
    dq->add_input(name + ".weight_zero_point");
    dq->add_output(name + ".weight");
    set_int(dq, "axis", 0);
  }
  /// The Conv/Gemm's inputs after its data: the dequantized weights and the f32 bias, if any.
  void add_qdq_inputs(onnx::NodeProto* n, const std::string& name, const QdqLayer& L) {
    n->add_input(name + ".weight");
    if (L.bias.defined()) {
      fill_onnx_float_tensor(name + ".bias", L.bias, m_graph->add_initializer());
      n->add_input(name + ".bias");
    }
  }
  const QdqLayer* qdq_layer(const std::string& name) const {
    if (!m_qdq)
      return nullptr;
    const auto it = m_qdq->layers.find(name);
    return it == m_qdq->layers.end() ? nullptr : &it->second;
  }
  bool folded_away(const std::string& bn) const {
    if (m_qdq)
      for (const auto& [name, L] : m_qdq->layers)
        if (L.folded_bn == bn)
          return true;
    return false;
  }
  // The parameter or buffer "<node>.<local>" as an initializer; returns its name.
  std::string initializer(const std::string& node, const std::string& local) {
    const std::string name = node + "." + local;
    const Tensor& t = *m_state.at(name);
    Tensor host = t;
    if (!t.device().is_cpu()) {
      host = Tensor::empty(t.shape(), t.dtype());
      m_backend.copy(t, host);
    }
    fill_onnx_float_tensor(name, host, m_graph->add_initializer());
    return name;
  }
  onnx::NodeProto* node(size_t i, const std::string& op) {
    onnx::NodeProto* n = m_graph->add_node();
    n->set_name(m_model.node_name(i));
    n->set_op_type(op);
    n->add_output(m_model.node_name(i));
    for (size_t k = 0; k < m_model.node_inputs(i).size(); ++k)
      n->add_input(input_name(i, k));
    return n;
  }

  void export_node(size_t i) {
    Layer& layer = m_model.layer(i);
    const std::string kind = layer.kind(), name = m_model.node_name(i);
    const QdqLayer* qdq = qdq_layer(name);
    if (kind == "batchnorm2d" && folded_away(name))
      return;  // its conv wrote its value (and its quantization) already
    if (qdq)
      add_qdq_weights(name, *qdq);
    if (kind == "linear") {
      onnx::NodeProto* n = node(i, "Gemm");
      if (qdq) {
        add_qdq_inputs(n, name, *qdq);
      } else {
        n->add_input(initializer(name, "weight"));
        if (static_cast<MatmulLayer&>(layer).has_bias())
          n->add_input(initializer(name, "bias"));
      }
      set_int(n, "transB", 1);
    } else if (kind == "conv2d") {
      const auto& conv = static_cast<Conv2d&>(layer);
      onnx::NodeProto* n = node(i, "Conv");
      if (qdq) {
        add_qdq_inputs(n, name, *qdq);
      } else {
        n->add_input(initializer(name, "weight"));
        if (conv.has_bias())
          n->add_input(initializer(name, "bias"));
      }
      const ConvParams& p = conv.conv_params();
      set_ints(n, "kernel_shape", {conv.kernel(), conv.kernel()});
      set_ints(n, "strides", {p.stride_h, p.stride_w});
      set_ints(n, "pads", {p.pad_h, p.pad_w, p.pad_h, p.pad_w});
    } else if (kind == "relu") {
      node(i, "Relu");
    } else if (kind == "add") {
      node(i, "Add");
    } else if (kind == "flatten") {
      set_int(node(i, "Flatten"), "axis", 1);
    } else if (kind == "maxpool2d") {
      const PoolParams& p = static_cast<MaxPool2d&>(layer).pool_params();
      onnx::NodeProto* n = node(i, "MaxPool");
      set_ints(n, "kernel_shape", {p.kernel_h, p.kernel_w});
      set_ints(n, "strides", {p.stride_h, p.stride_w});
      set_ints(n, "pads", {p.pad_h, p.pad_w, p.pad_h, p.pad_w});
    } else if (kind == "batchnorm2d") {
      const BatchNormParams& p = static_cast<BatchNorm2d&>(layer).bn_params();
      onnx::NodeProto* n = node(i, "BatchNormalization");
      for (const char* local : {"weight", "bias", "running_mean", "running_var"})
        n->add_input(initializer(name, local));
      set_float(n, "epsilon", p.eps);
      set_float(n, "momentum", 1 - p.momentum);  // ONNX weighs the running value
    } else if (kind == "dropout") {
      onnx::NodeProto* n = node(i, "Dropout");
      Tensor ratio = Tensor::empty({}, DType::f32);
      ratio.data<float>()[0] = static_cast<float>(static_cast<Dropout&>(layer).p());
      fill_onnx_float_tensor(name + ".ratio", ratio, m_graph->add_initializer());
      n->add_input(name + ".ratio");
    } else {
      throw ConfigError("ONNX export: node '" + name + "' is a " + layer.describe() +
                        ", which has no ONNX form (supported: linear, conv2d, relu, add, flatten, maxpool2d, "
                        "batchnorm2d, dropout)");
    }
    quantize_value(name);
    if (qdq && !qdq->folded_bn.empty()) {  // the folded BatchNorm's value is this conv's output
      m_read[qdq->folded_bn] = read(name);
      quantize_value(qdq->folded_bn);
    }
  }

  Model& m_model;
  Backend& m_backend;
  const QdqPlan* m_qdq = nullptr;
  std::map<std::string, std::string> m_read;  // Lathe value -> the ONNX tensor its readers read
  std::map<std::string, Tensor*> m_state;
  onnx::GraphProto* m_graph = nullptr;
};

}  // namespace

onnx::ModelProto model_to_onnx(Model& model, Backend& backend, const OnnxExportOptions& options, const QdqPlan* qdq) {
  LATHE_CHECK(model.size() > 0, "ONNX export: the model has no nodes");
  return Exporter(model, backend, qdq).run(options);
}

namespace {

int64_t write_checked(const onnx::ModelProto& proto, const std::string& path) {
  if (const std::string problem = onnx_checker_problem(proto); !problem.empty())
    throw Error("ONNX export of " + path + " fails the ONNX checker: " + problem);
  std::string bytes;
  LATHE_CHECK(proto.SerializeToString(&bytes), "ONNX export: serialising the model failed");
  write_file_atomic(path, bytes);
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

}  // namespace

int64_t export_onnx_qdq(Model& model, Backend& backend, const QdqPlan& plan, const std::string& path,
                        const OnnxExportOptions& options) {
  if (options.opset < 13)
    throw ConfigError("ONNX QDQ export: opset " + std::to_string(options.opset) +
                      " has no per-axis DequantizeLinear; allowed: 13 and later");
  return write_checked(model_to_onnx(model, backend, options, &plan), path);
}

int64_t export_onnx(Model& model, Backend& backend, const std::string& path, const OnnxExportOptions& options) {
  return write_checked(model_to_onnx(model, backend, options), path);
}

}  // namespace lathe
