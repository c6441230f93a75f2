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

class Exporter {
 public:
  Exporter(Model& model, Backend& backend) : m_model(model), m_backend(backend) {
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
    return j == Model::kModelInput ? "input" : m_model.node_name(static_cast<size_t>(j));
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
    if (kind == "linear") {
      onnx::NodeProto* n = node(i, "Gemm");
      n->add_input(initializer(name, "weight"));
      if (static_cast<MatmulLayer&>(layer).has_bias())
        n->add_input(initializer(name, "bias"));
      set_int(n, "transB", 1);
    } else if (kind == "conv2d") {
      const auto& conv = static_cast<Conv2d&>(layer);
      onnx::NodeProto* n = node(i, "Conv");
      n->add_input(initializer(name, "weight"));
      if (conv.has_bias())
        n->add_input(initializer(name, "bias"));
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
  }

  Model& m_model;
  Backend& m_backend;
  std::map<std::string, Tensor*> m_state;
  onnx::GraphProto* m_graph = nullptr;
};

}  // namespace

onnx::ModelProto model_to_onnx(Model& model, Backend& backend, const OnnxExportOptions& options) {
  LATHE_CHECK(model.size() > 0, "ONNX export: the model has no nodes");
  return Exporter(model, backend).run(options);
}

int64_t export_onnx(Model& model, Backend& backend, const std::string& path, const OnnxExportOptions& options) {
  const onnx::ModelProto proto = model_to_onnx(model, backend, options);
  if (const std::string problem = onnx_checker_problem(proto); !problem.empty())
    throw Error("ONNX export of " + path + " fails the ONNX checker: " + problem);
  std::string bytes;
  LATHE_CHECK(proto.SerializeToString(&bytes), "ONNX export: serialising the model failed");
  write_file_atomic(path, bytes);
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

}  // namespace lathe
