// Test fixtures: ONNX graphs built at test time with the ONNX protobuf API (no model files in the
// repository), e.g. OnnxBuilder b(13, {1, 8, 8}); b.node("Relu", {"input"}, {"y"}); b.output("y").
#pragma once

#include <onnx/onnx_pb.h>

#include <fstream>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/io/onnx/onnx_proto.h"

namespace lathe::test {

class OnnxBuilder {
 public:
  /// A graph taking "input" [N, ...sample_shape] at `opset` of the default domain.
  OnnxBuilder(int64_t opset, const Shape& sample_shape) {
    proto.set_ir_version(8);
    proto.set_producer_name("lathe-test");
    onnx::OperatorSetIdProto* o = proto.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    graph()->set_name("test");
    value_info(graph()->add_input(), "input", sample_shape, true);
  }
  onnx::GraphProto* graph() { return proto.mutable_graph(); }

  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    onnx::NodeProto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& i : inputs)
      n->add_input(i);
    for (const std::string& o : outputs)
      n->add_output(o);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  static void int1(onnx::NodeProto* n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void float1(onnx::NodeProto* n, const std::string& name, double v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(v));
  }
  void init(const std::string& name, const Tensor& host) {
    fill_onnx_float_tensor(name, host, graph()->add_initializer());
  }
  void init_i64(const std::string& name, const std::vector<int64_t>& v) {
    onnx::TensorProto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v)
      t->add_int64_data(x);
  }
  /// An output [N, K] with both sizes symbolic (the ONNX checker wants a shape; no inference runs).
  void output(const std::string& name) {
    onnx::ValueInfoProto* v = graph()->add_output();
    value_info(v, name, {}, false);
    onnx::TensorShapeProto* s = v->mutable_type()->mutable_tensor_type()->mutable_shape();
    s->add_dim()->set_dim_param("N");
    s->add_dim()->set_dim_param("K");
  }

  std::string save(const std::string& path) const {
    std::string bytes;
    proto.SerializeToString(&bytes);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  onnx::ModelProto proto;

 private:
  static void value_info(onnx::ValueInfoProto* v, const std::string& name, const Shape& sample, bool with_shape) {
    v->set_name(name);
    onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    if (!with_shape)
      return;
    t->mutable_shape()->add_dim()->set_dim_param("N");
    for (int64_t d : sample)
      t->mutable_shape()->add_dim()->set_dim_value(d);
  }
};

}  // namespace lathe::test
