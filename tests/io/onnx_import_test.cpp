// ONNX import: graphs built at test time with every supported op (opsets 11, 13 and 17) give the
// same logits on the reference backend as the equivalent Lathe model built from a layer list with
// the same weights (transposed by the test where ONNX holds them [in, out]); unsupported ops,
// attributes and opsets are refused naming the node, its op and what is supported.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/io/onnx/onnx_import.h"
#include "engine/nn/batchnorm2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/model_io.h"
#include "engine/nn/zoo.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::OnnxBuilder;
using test::random_tensor;
using Weights = std::vector<std::pair<std::string, Tensor>>;

class OnnxImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = std::filesystem::temp_directory_path() / ("lathe-onnx-import-" + std::to_string(::getpid()));
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }
  std::string path(const std::string& name) const { return (m_dir / name).string(); }

  // Logits of `model` (weights `w`) in evaluation mode on the reference backend.
  static Tensor eval(Model& model, const Weights& w, const Tensor& x) {
    ReferenceBackend be;
    Rng rng(7);
    model.create_params(be, DType::f32, rng);
    load_named_tensors(model, be, w, "test weights");
    LayerContext ctx{be, false};
    return model.forward(ctx, x).contiguous_copy();
  }
  static Tensor transposed(const Tensor& w) {
    Tensor t = Tensor::empty({w.shape()[1], w.shape()[0]}, DType::f32);
    for (int64_t i = 0; i < w.shape()[0]; ++i)
      for (int64_t j = 0; j < w.shape()[1]; ++j)
        t.set({j, i}, w.get({i, j}));
    return t;
  }
  std::string refusal(OnnxBuilder& b, const std::string& name) {
    try {
      import_onnx(b.save(path(name)));
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(accepted)";
  }

  std::filesystem::path m_dir;
};

// Conv (bias, pads) -> BatchNormalization -> Relu -> Conv (no bias) -> Add (residual) -> Identity ->
// MaxPool -> Dropout -> Reshape [0, -1] -> Gemm (transB 0) -> Softmax, at each opset.
class OnnxCnnImport : public OnnxImportTest, public ::testing::WithParamInterface<int> {};

TEST_P(OnnxCnnImport, MatchesTheSameLatheModel) {
  const int opset = GetParam();
  Rng rng(11);
  const Tensor c1w = random_tensor({4, 2, 3, 3}, rng), c1b = random_tensor({4}, rng);
  const Tensor gamma = random_tensor({4}, rng, DType::f32, MemoryFormat::contiguous, 0.5, 1.5);
  const Tensor beta = random_tensor({4}, rng), mean = random_tensor({4}, rng);
  const Tensor var = random_tensor({4}, rng, DType::f32, MemoryFormat::contiguous, 0.2, 2);
  const Tensor c2w = random_tensor({4, 4, 3, 3}, rng);
  const Tensor fcw_in_out = random_tensor({64, 10}, rng), fcb = random_tensor({10}, rng);

  OnnxBuilder b(opset, {2, 8, 8});
  b.init("c1.weight", c1w);
  b.init("c1.bias", c1b);
  b.init("bn.weight", gamma);
  b.init("bn.bias", beta);
  b.init("bn.running_mean", mean);
  b.init("bn.running_var", var);
  b.init("c2.weight", c2w);
  b.init("fc.weight", fcw_in_out);
  b.init("fc.bias", fcb);
  b.init_i64("flat_shape", {0, -1});
  auto* conv1 = b.node("Conv", {"input", "c1.weight", "c1.bias"}, {"t1"}, "/c1/Conv");
  OnnxBuilder::ints(conv1, "pads", {1, 1, 1, 1});
  OnnxBuilder::ints(conv1, "kernel_shape", {3, 3});
  auto* bn = b.node("BatchNormalization", {"t1", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"t2"},
                    "/bn/BatchNormalization");
  OnnxBuilder::float1(bn, "epsilon", 1e-3);
  OnnxBuilder::float1(bn, "momentum", 0.75);
  b.node("Relu", {"t2"}, {"t3"}, "relu1");
  auto* conv2 = b.node("Conv", {"t3", "c2.weight"}, {"t4"}, "/c2/Conv");
  OnnxBuilder::ints(conv2, "pads", {1, 1, 1, 1});
  OnnxBuilder::ints(conv2, "strides", {1, 1});
  b.node("Add", {"t4", "t3"}, {"t5"}, "res");
  b.node("Identity", {"t5"}, {"t5i"}, "id");
  auto* pool = b.node("MaxPool", {"t5i"}, {"t6"}, "pool");
  OnnxBuilder::ints(pool, "kernel_shape", {2, 2});
  OnnxBuilder::ints(pool, "strides", {2, 2});
  if (opset < 12) {
    OnnxBuilder::float1(b.node("Dropout", {"t6"}, {"t7"}, "drop"), "ratio", 0.25);
  } else {
    Tensor ratio = Tensor::empty({}, DType::f32);
    ratio.set_flat(0, 0.25);
    b.init("drop_ratio", ratio);
    b.node("Dropout", {"t6", "drop_ratio"}, {"t7"}, "drop");
  }
  b.node("Reshape", {"t7", "flat_shape"}, {"t8"}, "flat");
  b.node("Gemm", {"t8", "fc.weight", "fc.bias"}, {"t9"}, "/fc/Gemm");
  OnnxBuilder::int1(b.node("Softmax", {"t9"}, {"probs"}, "softmax"), "axis", 1);
  b.output("probs");

  OnnxImport imported = import_onnx(b.save(path("cnn.onnx")));
  EXPECT_EQ(imported.opset, opset);
  EXPECT_EQ(imported.sha256.size(), 64u);
  ASSERT_EQ(imported.notes.size(), 1u);
  EXPECT_NE(imported.notes[0].find("Softmax"), std::string::npos);
  // PyTorch's module names come from the weights' names, the others from the nodes'.
  std::vector<std::string> names;
  for (size_t i = 0; i < imported.model->size(); ++i)
    names.push_back(imported.model->node_name(i));
  EXPECT_EQ(names, (std::vector<std::string>{"c1", "bn", "relu1", "c2", "res", "pool", "drop", "flat", "fc"}));
  const auto& bn_layer = static_cast<const BatchNorm2d&>(imported.model->layer(1));
  EXPECT_NEAR(bn_layer.bn_params().eps, 1e-3, 1e-9);
  EXPECT_NEAR(bn_layer.bn_params().momentum, 0.25, 1e-7);  // ONNX 0.75 on the running value
  EXPECT_DOUBLE_EQ(static_cast<const Dropout&>(imported.model->layer(6)).p(), 0.25);

  const nlohmann::json layers = nlohmann::json::parse(R"([
    {"name": "c1", "type": "conv2d", "out": 4, "kernel": 3, "padding": 1},
    {"name": "bn", "type": "batchnorm2d", "eps": 0.001},
    {"name": "relu1", "type": "relu"},
    {"name": "c2", "type": "conv2d", "out": 4, "kernel": 3, "padding": 1, "bias": false},
    {"name": "res", "type": "add", "inputs": ["c2", "relu1"]},
    {"name": "pool", "type": "maxpool2d", "kernel": 2},
    {"name": "drop", "type": "dropout", "p": 0.25},
    {"name": "flat", "type": "flatten"},
    {"name": "fc", "type": "linear", "out": 10}])");
  auto expected_model = build_model_from_layers(layers, {2, 8, 8});
  const Weights expected_weights = {{"c1.weight", c1w},
                                    {"c1.bias", c1b},
                                    {"bn.weight", gamma},
                                    {"bn.bias", beta},
                                    {"bn.running_mean", mean},
                                    {"bn.running_var", var},
                                    {"bn.num_batches_tracked", Tensor::zeros({1}, DType::s32)},
                                    {"c2.weight", c2w},
                                    {"fc.weight", transposed(fcw_in_out)},
                                    {"fc.bias", fcb}};
  const Tensor x = random_tensor({3, 2, 8, 8}, rng);
  const Tensor got = eval(*imported.model, imported.weights, x);
  const Tensor want = eval(*expected_model, expected_weights, x);
  ASSERT_EQ(got.shape(), (Shape{3, 10}));
  EXPECT_EQ(test::mismatches(got, want), 0);
}

INSTANTIATE_TEST_SUITE_P(Opsets, OnnxCnnImport, ::testing::Values(11, 13, 17));

// Flatten -> MatMul + Add (one Linear with bias) -> Relu -> Gemm (transB 1, bias [1, out], its
// weight through an Identity).
TEST_F(OnnxImportTest, MatMulPlusAddBecomesOneLinear) {
  Rng rng(5);
  const Tensor w1 = random_tensor({16, 8}, rng), b1 = random_tensor({8}, rng);
  const Tensor w2 = random_tensor({3, 8}, rng), b2 = random_tensor({1, 3}, rng);
  OnnxBuilder b(13, {1, 4, 4});
  b.init("h.weight", w1);
  b.init("h_bias", b1);
  b.init("o.weight", w2);
  b.init("o.bias", b2);
  b.node("Flatten", {"input"}, {"f"}, "flat");
  b.node("MatMul", {"f", "h.weight"}, {"m"}, "mm");
  b.node("Add", {"h_bias", "m"}, {"a"}, "bias_add");
  b.node("Relu", {"a"}, {"r"}, "act");
  b.node("Identity", {"o.weight"}, {"o_w_shared"}, "Identity_0");  // as PyTorch writes shared weights
  OnnxBuilder::int1(b.node("Gemm", {"r", "o_w_shared", "o.bias"}, {"y"}, "gemm"), "transB", 1);
  b.output("y");
  OnnxImport imported = import_onnx(b.save(path("mlp.onnx")));
  EXPECT_TRUE(imported.notes.empty());
  ASSERT_EQ(imported.model->size(), 4u);  // the Add is the Linear's bias
  EXPECT_EQ(imported.model->node_name(1), "h");

  auto expected_model = build_model_from_layers(nlohmann::json::parse(R"([
    {"name": "flat", "type": "flatten"}, {"name": "h", "type": "linear", "out": 8},
    {"name": "act", "type": "relu"}, {"name": "o", "type": "linear", "out": 3}])"),
                                                {1, 4, 4});
  const Weights expected_weights = {
      {"h.weight", transposed(w1)}, {"h.bias", b1}, {"o.weight", w2}, {"o.bias", b2.view({3})}};
  const Tensor x = random_tensor({5, 1, 4, 4}, rng);
  EXPECT_EQ(test::mismatches(eval(*imported.model, imported.weights, x), eval(*expected_model, expected_weights, x)),
            0);
}

// What torch.onnx.export (2.x, dynamo) writes: IR version 10, which libonnx 1.12 (IR 8) cannot check
// as such, and Reshape [-1, features] with allowzero = 1.
TEST_F(OnnxImportTest, CurrentPyTorchExportsAreTaken) {
  OnnxBuilder b(17, {1, 4, 4});
  b.proto.set_ir_version(10);
  b.init_i64("s", {-1, 16});
  OnnxBuilder::int1(b.node("Reshape", {"input", "s"}, {"y"}, "node_Reshape_1"), "allowzero", 1);
  b.output("y");
  OnnxImport imported = import_onnx(b.save(path("ir10.onnx")));
  ASSERT_EQ(imported.model->size(), 1u);
  EXPECT_EQ(imported.model->layer(0).kind(), "flatten");

  OnnxBuilder zero(17, {1, 4, 4});  // with allowzero = 1 a 0 is a real zero, not N: refused
  zero.init_i64("s", {0, -1});
  OnnxBuilder::int1(zero.node("Reshape", {"input", "s"}, {"y"}, "rs"), "allowzero", 1);
  zero.output("y");
  EXPECT_NE(refusal(zero, "allowzero.onnx").find("node 'rs' (Reshape)"), std::string::npos);
}

TEST_F(OnnxImportTest, UnsupportedOpsAttributesAndOpsetsAreRefusedNamingTheNode) {
  Rng rng(3);
  {  // an LSTM
    OnnxBuilder b(13, {4, 8});
    b.init("W", random_tensor({1, 16, 8}, rng));
    b.init("R", random_tensor({1, 16, 4}, rng));
    OnnxBuilder::int1(b.node("LSTM", {"input", "W", "R"}, {"y"}, "rnn1"), "hidden_size", 4);
    b.output("y");
    const std::string msg = refusal(b, "lstm.onnx");
    EXPECT_NE(msg.find("node 'rnn1' (LSTM)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("supported ops: Conv, Gemm"), std::string::npos) << msg;
  }
  {  // a grouped convolution
    OnnxBuilder b(13, {2, 6, 6});
    b.init("w", random_tensor({2, 1, 3, 3}, rng));
    OnnxBuilder::int1(b.node("Conv", {"input", "w"}, {"y"}, "dw"), "group", 2);
    b.output("y");
    const std::string msg = refusal(b, "group.onnx");
    EXPECT_NE(msg.find("node 'dw' (Conv): group 2 is not supported (supported: 1)"), std::string::npos) << msg;
  }
  {  // an attribute Lathe's layer does not have
    OnnxBuilder b(13, {1, 6, 6});
    auto* pool = b.node("MaxPool", {"input"}, {"y"}, "p");
    OnnxBuilder::ints(pool, "kernel_shape", {2, 2});
    OnnxBuilder::int1(pool, "ceil_mode", 1);
    b.output("y");
    const std::string msg = refusal(b, "ceil.onnx");
    EXPECT_NE(msg.find("node 'p' (MaxPool): ceil_mode 1 is not supported"), std::string::npos) << msg;
  }
  {  // average pooling: no Lathe layer computes it, so it is refused rather than approximated
    OnnxBuilder b(13, {1, 6, 6});
    b.node("GlobalAveragePool", {"input"}, {"y"}, "gap");
    b.output("y");
    const std::string msg = refusal(b, "gap.onnx");
    EXPECT_NE(msg.find("node 'gap' (GlobalAveragePool)"), std::string::npos) << msg;
  }
  {  // a reshape that is not a flatten to [N, features]
    OnnxBuilder b(13, {1, 4, 4});
    b.init_i64("s", {1, -1});
    b.node("Reshape", {"input", "s"}, {"y"}, "rs");
    b.output("y");
    const std::string msg = refusal(b, "reshape.onnx");
    EXPECT_NE(msg.find("node 'rs' (Reshape): reshaping [1, 1, 4, 4] to [1, -1] is not supported"), std::string::npos)
        << msg;
  }
  {  // an opset outside 11-17
    OnnxBuilder b(10, {4});
    b.node("Relu", {"input"}, {"y"}, "r");
    b.output("y");
    const std::string msg = refusal(b, "old.onnx");
    EXPECT_NE(msg.find("opset 10 of the default ONNX domain; supported: 11 to 17"), std::string::npos) << msg;
  }
}

TEST_F(OnnxImportTest, BrokenFilesAreDataErrorsNamingTheFile) {
  EXPECT_THROW(
      {
        try {
          import_onnx(path("missing.onnx"));
        } catch (const DataError& e) {
          EXPECT_NE(std::string(e.what()).find("missing.onnx: cannot open"), std::string::npos) << e.what();
          throw;
        }
      },
      DataError);
  try {  // a device is not read (it would never end)
    import_onnx("/dev/zero");
    ADD_FAILURE() << "accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/zero: cannot open the ONNX file (not a regular file)"),
              std::string::npos)
        << e.what();
  }
  std::ofstream(path("junk.onnx")) << "this is not a protobuf";
  EXPECT_THROW(import_onnx(path("junk.onnx")), DataError);
  OnnxBuilder b(13, {4});  // a node reading a tensor nothing defines: the ONNX checker's job
  b.node("Relu", {"nowhere"}, {"y"}, "r");
  b.output("y");
  try {
    import_onnx(b.save(path("dangling.onnx")));
    ADD_FAILURE() << "accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("the ONNX checker rejects the model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
