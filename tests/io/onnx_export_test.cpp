// ONNX export: every layer kind written, checked by onnx::checker, and read back (Lathe -> ONNX ->
// Lathe) with the same node names, the same weights and bit-identical logits on the reference backend.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/io/onnx/onnx_import.h"
#include "engine/io/onnx/onnx_proto.h"
#include "engine/nn/zoo.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

class OnnxExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = std::filesystem::temp_directory_path() / ("lathe-onnx-export-" + std::to_string(::getpid()));
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  // Exports `model` (params created on `be`), imports the file, and compares names and logits.
  void round_trip(Model& model, ReferenceBackend& be, const Shape& batch_shape, const std::string& file) {
    const std::string path = (m_dir / file).string();
    const int64_t bytes = export_onnx(model, be, path, {.metadata = {{"lathe_run", "test"}}});
    EXPECT_EQ(bytes, static_cast<int64_t>(std::filesystem::file_size(path)));
    EXPECT_GT(bytes, model.param_bytes());  // the f32 weights, plus the graph

    OnnxImport back = import_onnx(path);
    ASSERT_EQ(back.model->size(), model.size());
    for (size_t i = 0; i < model.size(); ++i) {
      EXPECT_EQ(back.model->node_name(i), model.node_name(i));
      EXPECT_EQ(back.model->layer(i).describe(), model.layer(i).describe());
      EXPECT_EQ(back.model->node_inputs(i), model.node_inputs(i));
    }
    Rng other(99);  // different initial weights: everything must come from the file
    back.model->create_params(be, DType::f32, other);
    load_onnx_weights(*back.model, be, back);

    Rng rng(4);
    const Tensor x = test::random_tensor(batch_shape, rng);
    LayerContext ctx{be, false};
    const Tensor want = model.forward(ctx, x).contiguous_copy();
    const Tensor got = back.model->forward(ctx, x).contiguous_copy();
    EXPECT_EQ(test::mismatches(got, want), 0);
  }

  std::filesystem::path m_dir;
};

TEST_F(OnnxExportTest, ZooCnnRoundTripsBitIdentically) {
  auto cnn = build_zoo_model("cnn");
  ReferenceBackend be;
  Rng rng(1);
  cnn->create_params(be, DType::f32, rng);
  round_trip(*cnn, be, {2, 1, 28, 28}, "cnn.onnx");
}

TEST_F(OnnxExportTest, ResidualBatchNormDropoutModelRoundTripsBitIdentically) {
  auto model = build_model_from_layers(nlohmann::json::parse(R"([
    {"name": "stem", "type": "conv2d", "out": 4, "kernel": 3, "padding": 1, "stride": 1},
    {"name": "bn", "type": "batchnorm2d", "eps": 0.001, "momentum": 0.2},
    {"name": "act", "type": "relu"},
    {"name": "branch", "type": "conv2d", "out": 4, "kernel": 3, "padding": 1, "bias": false},
    {"name": "sum", "type": "add", "inputs": ["branch", "act"]},
    {"name": "down", "type": "conv2d", "out": 6, "kernel": 3, "stride": 2},
    {"name": "pool", "type": "maxpool2d", "kernel": 2, "stride": 1, "padding": 1},
    {"name": "drop", "type": "dropout", "p": 0.375},
    {"name": "flat", "type": "flatten"},
    {"name": "fc", "type": "linear", "out": 5}])"),
                                       {3, 9, 9});
  ReferenceBackend be;
  Rng rng(2);
  model->create_params(be, DType::f32, rng);
  for (const NamedBuffer& b : model->named_buffers())  // running statistics away from 0 and 1
    if (b.name == "bn.running_mean" || b.name == "bn.running_var")
      for (int64_t i = 0; i < b.buffer->value.numel(); ++i)
        b.buffer->value.set_flat(i, 0.5 + 0.25 * static_cast<double>(i));
  round_trip(*model, be, {3, 3, 9, 9}, "resnet.onnx");
}

TEST_F(OnnxExportTest, TheFileNamesLatheNodesAndPyTorchParameters) {
  auto mlp = build_zoo_model("mlp");
  ReferenceBackend be;
  Rng rng(3);
  mlp->create_params(be, DType::f32, rng);
  const onnx::ModelProto proto = model_to_onnx(*mlp, be, {.opset = 17});
  EXPECT_EQ(onnx_checker_problem(proto), "");
  EXPECT_EQ(proto.opset_import(0).version(), 17);
  ASSERT_EQ(proto.graph().node_size(), static_cast<int>(mlp->size()));
  EXPECT_EQ(proto.graph().node(0).name(), mlp->node_name(0));
  EXPECT_EQ(proto.graph().node(0).op_type(), "Gemm");
  EXPECT_EQ(proto.graph().initializer(0).name(), "0.weight");
  EXPECT_EQ(proto.graph().input(0).type().tensor_type().shape().dim(1).dim_value(), 784);
}

}  // namespace
}  // namespace lathe
