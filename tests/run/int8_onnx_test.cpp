// INT8 as QDQ ONNX: the graph written for a residual BatchNorm model read back with libonnx (node
// types in order, Lathe's node names, int8 weight initializers, per-channel scales on axis 0, the
// activation scales and zero points), the saved-file path giving the same bytes, the weights of a
// flatten -> linear back in (C, H, W) column order, and the size against the f32 file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/io/onnx/onnx_proto.h"
#include "engine/nn/zoo.h"
#include "engine/run/int8_onnx.h"
#include "tests/quant/int8_test_models.h"

namespace lathe {
namespace {

using test::calibrate_minmax;
using test::random_images;

class QdqExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = std::filesystem::temp_directory_path() / ("lathe-qdq-" + std::to_string(::getpid()));
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }
  std::string path(const std::string& f) const { return (m_dir / f).string(); }
  static std::string bytes_of(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::filesystem::path m_dir;
};

const onnx::TensorProto& initializer(const onnx::ModelProto& m, const std::string& name) {
  for (const onnx::TensorProto& t : m.graph().initializer())
    if (t.name() == name)
      return t;
  throw Error("no initializer " + name);
}
float float_at(const onnx::TensorProto& t, int64_t i) {
  float v;
  std::memcpy(&v, t.raw_data().data() + 4 * i, 4);
  return v;
}

TEST_F(QdqExportTest, ResidualBatchNormGraphReadsBackWithLathesScales) {
  DnnlBackend be;
  auto m = test::residual_graph(be, 31);
  const ActivationParams acts = calibrate_minmax(*m, be, random_images(32, 8, 32));
  Int8Model q(*m, be, acts);
  const int64_t bytes = export_onnx_qdq(*m, be, qdq_plan_of(q), path("res.onnx"));
  EXPECT_EQ(bytes, static_cast<int64_t>(std::filesystem::file_size(path("res.onnx"))));
  const onnx::ModelProto back = read_onnx_file(path("res.onnx"));  // runs onnx::checker

  std::vector<std::string> ops, names;
  for (const onnx::NodeProto& n : back.graph().node()) {
    ops.push_back(n.op_type());
    names.push_back(n.name());
  }
  const std::vector<std::string> want = {"QuantizeLinear",
                                         "DequantizeLinear",  // input
                                         "DequantizeLinear",
                                         "Conv",
                                         "QuantizeLinear",
                                         "DequantizeLinear",  // stem
                                         "BatchNormalization",
                                         "Relu",
                                         "QuantizeLinear",
                                         "DequantizeLinear",  // bn1 (f32), r1
                                         "DequantizeLinear",
                                         "Conv",
                                         "Relu",
                                         "QuantizeLinear",
                                         "DequantizeLinear",  // c1 (+bn2 folded), r2
                                         "DequantizeLinear",
                                         "Conv",
                                         "QuantizeLinear",
                                         "DequantizeLinear",  // c2
                                         "Add",
                                         "QuantizeLinear",
                                         "DequantizeLinear",  // add
                                         "BatchNormalization",
                                         "Relu",
                                         "MaxPool",
                                         "Flatten",
                                         "QuantizeLinear",
                                         "DequantizeLinear",
                                         "DequantizeLinear",
                                         "Gemm"};
  EXPECT_EQ(ops, want);
  for (const char* lathe_name : {"stem", "bn1", "r1", "c1", "r2", "c2", "add", "bn", "r3", "pool", "flat", "fc"})
    EXPECT_NE(std::find(names.begin(), names.end(), lathe_name), names.end()) << lathe_name;
  EXPECT_EQ(std::find(names.begin(), names.end(), "bn2"), names.end()) << "bn2 is folded into c1";

  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : q.state_tensors())
    state[name] = t;
  for (const char* layer : {"stem", "c1", "c2", "fc"}) {
    const std::string L = layer;
    const onnx::TensorProto& w = initializer(back, L + ".weight_q");
    EXPECT_EQ(w.data_type(), onnx::TensorProto::INT8) << L;
    EXPECT_EQ(static_cast<int64_t>(w.raw_data().size()), state.at(L + ".weight").numel()) << L;
    const onnx::TensorProto& s = initializer(back, L + ".weight_scale");
    EXPECT_EQ(s.data_type(), onnx::TensorProto::FLOAT);
    ASSERT_EQ(s.dims_size(), 1);
    for (int64_t o = 0; o < s.dims(0); ++o)
      EXPECT_EQ(float_at(s, o), state.at(L + ".weight_scale").at_flat(o)) << L << " channel " << o;
    EXPECT_EQ(initializer(back, L + ".weight_zero_point").data_type(), onnx::TensorProto::INT8);
  }
  for (const onnx::NodeProto& n : back.graph().node())
    if (n.name() == "c1/weight/DequantizeLinear")
      EXPECT_EQ(onnx_attribute(n, "axis")->i(), 0);
  // the folded conv's bias is the BatchNorm-folded one Lathe runs
  const onnx::TensorProto& b = initializer(back, "c1.bias");
  for (int64_t o = 0; o < 4; ++o)
    EXPECT_EQ(float_at(b, o), state.at("c1.bias").at_flat(o));
  for (const char* value : {"input", "stem", "r1", "r2", "c2", "add", "flat"}) {
    const std::string v = value;
    EXPECT_EQ(float_at(initializer(back, v + ".act_scale"), 0), acts.at(v).scale[0]) << v;
    const onnx::TensorProto& zp = initializer(back, v + ".act_zero_point");
    EXPECT_EQ(zp.data_type(), onnx::TensorProto::UINT8) << v;
    EXPECT_EQ(static_cast<uint8_t>(zp.raw_data()[0]), acts.at(v).zero_point[0]) << v;
  }
}

TEST_F(QdqExportTest, SavedFileGivesTheSameGraphAndCnnWeightsComeBackInChwOrder) {
  DnnlBackend be;
  auto m = test::small_cnn(be, 41);
  Int8Model q(*m, be, calibrate_minmax(*m, be, random_images(32, 12, 42)));
  const int64_t direct = export_onnx_qdq(*m, be, qdq_plan_of(q), path("a.onnx"));
  q.save(path("int8.safetensors"), {{"qdq", qdq_plan_metadata(q)}});
  const SafetensorsFile file = load_safetensors(path("int8.safetensors"));
  const QdqPlan plan = qdq_plan_from_file(file, path("int8.safetensors"));
  EXPECT_EQ(export_onnx_qdq(*m, be, plan, path("b.onnx")), direct);
  EXPECT_EQ(bytes_of(path("a.onnx")), bytes_of(path("b.onnx")));

  // "7" reads the flatten of [8, 3, 3]: the executor holds its columns in (H, W, C) order, the
  // file in the f32 layer's (C, H, W) order: round(w / scale) per output row, computed here.
  const QdqLayer& fc = plan.layers.at("7");
  const Tensor& w = m->layer(m->find("7")).params()[0]->value;
  ASSERT_EQ(fc.weight_q.shape(), w.shape());
  const int qmax = q.weight_bits() == 8 ? 127 : 63;
  int64_t differ = 0;
  for (int64_t o = 0; o < w.dim(0); ++o)
    for (int64_t k = 0; k < w.dim(1); ++k) {
      const double want = std::clamp(std::nearbyint(w.get({o, k}) / fc.weight_scale[o]), -1.0 * qmax, 1.0 * qmax);
      differ += fc.weight_q.get({o, k}) != want;
    }
  EXPECT_EQ(differ, 0);

  // the activation parameters and options come back from the file: the same INT8 model again
  Int8ModelOptions options;
  const ActivationParams acts = qdq_activation_params(file, path("int8.safetensors"), &options);
  Int8Model again(*m, be, acts, options);
  EXPECT_EQ(again.plan(), q.plan());
  const Tensor x = test::images_of(random_images(8, 12, 43));
  EXPECT_EQ(test::mismatches(again.forward(x), q.forward(x)), 0);

  SafetensorsFile bare = file;
  bare.metadata.erase("qdq");
  EXPECT_THROW(qdq_plan_from_file(bare, "old.safetensors"), DataError);
}

TEST_F(QdqExportTest, ZooCnnInt8FileIsUnderAThirdOfF32AndDynamicIsRefused) {
  DnnlBackend be;
  auto cnn = build_zoo_model("cnn");
  Rng rng(5);
  cnn->create_params(be, DType::f32, rng);
  Int8Model q(*cnn, be, calibrate_minmax(*cnn, be, random_images(16, 28, 6)));
  const int64_t f32 = export_onnx(*cnn, be, path("f32.onnx"));
  const int64_t int8 = export_onnx_qdq(*cnn, be, qdq_plan_of(q), path("int8.onnx"));
  EXPECT_LE(static_cast<double>(int8), 0.30 * static_cast<double>(f32)) << int8 << " vs " << f32;
  EXPECT_GT(static_cast<double>(int8), 0.25 * static_cast<double>(f32)) << "int8 weights are a quarter of f32";

  Int8ModelOptions dynamic;
  dynamic.dynamic_activations = true;
  Int8Model dq(*cnn, be, {}, dynamic);
  EXPECT_THROW(qdq_plan_of(dq), ConfigError);
  EXPECT_THROW(export_onnx_qdq(*cnn, be, qdq_plan_of(q), path("x.onnx"), {.opset = 11}), ConfigError);
}

}  // namespace
}  // namespace lathe
