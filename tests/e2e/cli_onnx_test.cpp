// lathe-cli with an ONNX model (model.onnx): an unsupported op is refused before anything is written
// (exit 2, the node and op named, no store); a supported file trains, and the run records where its
// model came from (the file and its sha256).
#include <gtest/gtest.h>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/core/sha256.h"
#include "engine/data/dataset.h"
#include "engine/io/onnx/onnx_export.h"
#include "engine/nn/zoo.h"
#include "tests/e2e/cli_test_util.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/random_tensor.h"

namespace lathe::test {
namespace {

namespace fs = std::filesystem;
using CliOnnx = Cli;

TEST_F(CliOnnx, AnUnsupportedOpIsRefusedBeforeAnyRunNamingTheNode) {
  OnnxBuilder b(13, {1, 28, 28});
  Rng rng(1);
  b.init("W", random_tensor({1, 16, 28}, rng));
  b.init("R", random_tensor({1, 16, 4}, rng));
  OnnxBuilder::int1(b.node("LSTM", {"input", "W", "R"}, {"y"}, "lstm1"), "hidden_size", 4);
  b.output("y");
  const std::string model = b.save((m_dir / "lstm.onnx").string());
  const std::string cfg = write("lstm.json", R"({"model": {"onnx": ")" + model + R"("}, "train": {"epochs": 1}})");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("model.onnx"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("node 'lstm1' (LSTM)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("supported ops: Conv"), std::string::npos) << r.out;
  EXPECT_FALSE(store_written()) << r.out;
  EXPECT_FALSE(runs_written()) << r.out;
  EXPECT_EQ(run_cmd("validate " + cfg).code, 2);
}

TEST_F(CliOnnx, AnOnnxModelTrainsAndTheRunRecordsItsFileAndDigest) {
  if (!fs::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  auto net = build_model_from_layers(nlohmann::json::parse(R"([
    {"name": "conv", "type": "conv2d", "out": 4, "kernel": 3, "stride": 2},
    {"name": "bn", "type": "batchnorm2d"}, {"name": "act", "type": "relu"},
    {"name": "flat", "type": "flatten"}, {"name": "fc", "type": "linear", "out": 10}])"),
                                     {1, 28, 28});
  ReferenceBackend be;
  Rng rng(2);
  net->create_params(be, DType::f32, rng);
  const std::string model = (m_dir / "small.onnx").string();
  export_onnx(*net, be, model);
  const std::string cfg = write("onnx.json", R"({"name": "from-onnx", "model": {"onnx": ")" + model +
                                                 R"("}, "train": {"epochs": 1},
                                                 "data": {"train_subset": 256, "test_subset": 100}})");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  ASSERT_EQ(r.code, 0) << r.out;
  const CmdResult show = run_cmd("--db " + db() + " show from-onnx --json");
  ASSERT_EQ(show.code, 0) << show.out;
  const auto shown = nlohmann::json::parse(show.out);
  EXPECT_EQ(shown["config"]["model"]["zoo"], "onnx");
  EXPECT_NE(show.out.find("\"model_source\""), std::string::npos) << show.out;
  EXPECT_NE(show.out.find(sha256_file(model)), std::string::npos) << show.out;
}

TEST_F(CliOnnx, AStructurallyPrunedRunIsWrittenAsASmallerOnnxModel) {
  if (!fs::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("pruned.json", R"({"name": "pruned", "model": {"zoo": "cnn"}, "train": {"epochs": 1},
      "data": {"train_subset": 256, "test_subset": 100}, "output": {"onnx": true},
      "prune": {"method": "l1-structured", "ratio": 0.5, "finetune_epochs": 1}})");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  ASSERT_EQ(r.code, 0) << r.out;
  const auto shown = nlohmann::json::parse(run_cmd("--db " + db() + " show pruned --json").out);
  std::string run_onnx;
  for (const auto& a : shown["artifacts"])
    if (a["kind"] == "onnx")
      run_onnx = a["path"];
  ASSERT_FALSE(run_onnx.empty()) << shown.dump();

  const std::string full = (m_dir / "full.onnx").string(), pruned = (m_dir / "pruned.onnx").string();
  const CmdResult e1 = run_cmd("--db " + db() + " export-model pruned --artifact model -o " + full);
  ASSERT_EQ(e1.code, 0) << e1.out;
  const CmdResult e2 = run_cmd("--db " + db() + " export-model pruned --format onnx -o " + pruned);
  ASSERT_EQ(e2.code, 0) << e2.out;
  EXPECT_NE(e2.out.find("from the pruned weights"), std::string::npos) << e2.out;
  // Half the filters and neurons: about a quarter of the weights remain.
  EXPECT_LT(fs::file_size(pruned), fs::file_size(full) / 2);
  EXPECT_LT(fs::file_size(run_onnx), fs::file_size(full) / 2);
  // The pruned file is a model Lathe takes again.
  const std::string again = write("again.json", R"({"model": {"onnx": ")" + pruned + R"("}})");
  EXPECT_EQ(run_cmd("validate " + again).code, 0);

  const CmdResult int8 = run_cmd("--db " + db() + " export-model pruned --artifact model-int8 -o x.onnx");
  EXPECT_EQ(int8.code, 2) << int8.out;
  EXPECT_NE(int8.out.find("recorded no model-int8 artifact"), std::string::npos) << int8.out;
  const CmdResult fmt = run_cmd("--db " + db() + " export-model pruned --format tflite -o x.onnx");
  EXPECT_EQ(fmt.code, 2) << fmt.out;
  EXPECT_NE(fmt.out.find("allowed: onnx"), std::string::npos) << fmt.out;
}

// Issue 18 item 2: an INT8 run leaves as QDQ, from the run (output.onnx) and from export-model
// (its default on a quantizing run): both pass the checker on the way out, the export has the
// run file's size up to its metadata, and both are under 30% of the f32 file.
TEST_F(CliOnnx, AnInt8RunIsWrittenAsQdq) {
  if (!fs::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("int8.json", R"({"name": "int8", "model": {"zoo": "cnn"}, "train": {"epochs": 1},
      "data": {"train_subset": 256, "test_subset": 100}, "output": {"onnx": true},
      "quant": {"mode": "ptq-static", "calib_samples": 64}})");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  ASSERT_EQ(r.code, 0) << r.out;
  const auto shown = nlohmann::json::parse(run_cmd("--db " + db() + " show int8 --json").out);
  std::string run_f32, run_int8;
  for (const auto& a : shown["artifacts"]) {
    if (a["kind"] == "onnx")
      run_f32 = a["path"];
    if (a["kind"] == "onnx-int8")
      run_int8 = a["path"];
  }
  ASSERT_FALSE(run_int8.empty()) << shown.dump();
  const std::string out = (m_dir / "int8.onnx").string();
  const CmdResult e = run_cmd("--db " + db() + " export-model int8 -o " + out);
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("INT8 QDQ"), std::string::npos) << e.out;
  EXPECT_LE(fs::file_size(run_int8), 0.30 * fs::file_size(run_f32));
  EXPECT_LE(fs::file_size(out), 0.30 * fs::file_size(run_f32));
  // The same graph and initializers; the metadata adds the artifact kind and digest.
  EXPECT_NEAR(static_cast<double>(fs::file_size(out)), static_cast<double>(fs::file_size(run_int8)), 400.0);
}

// Issue 18 item 1: an ONNX model as the distillation teacher, through lathe-cli: a tiny teacher
// written at test time as distill.teacher (graph and weights from the file), then a run imported
// from that file as the teacher of another run (run:<name>, found in the store); the run records
// where the teacher came from (the file and its sha256). A teacher with an unsupported op is
// refused by validate, naming distill.teacher and the node.
TEST_F(CliOnnx, AnOnnxTeacherDistillsAStudent) {
  if (!fs::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  auto net = build_model_from_layers(nlohmann::json::parse(R"([
    {"name": "conv", "type": "conv2d", "out": 4, "kernel": 3, "stride": 2},
    {"name": "act", "type": "relu"}, {"name": "flat", "type": "flatten"}, {"name": "fc", "type": "linear", "out": 10}])"),
                                     {1, 28, 28});
  ReferenceBackend be;
  Rng rng(3);
  net->create_params(be, DType::f32, rng);
  const std::string teacher = (m_dir / "teacher.onnx").string();
  export_onnx(*net, be, teacher);
  const std::string small = R"("train": {"epochs": 1}, "data": {"train_subset": 256, "test_subset": 100})";
  const std::string cfg = write("kd.json", R"({"name": "kd", "model": {"zoo": "student"}, "distill": {"teacher": ")" +
                                               teacher + R"("}, )" + small + "}");
  ASSERT_EQ(run_cmd("validate " + cfg).code, 0);
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  ASSERT_EQ(r.code, 0) << r.out;
  const CmdResult show = run_cmd("--db " + db() + " show kd --json");
  ASSERT_EQ(show.code, 0) << show.out;
  const auto shown = nlohmann::json::parse(show.out);
  std::string origin;
  for (const auto& e : shown["events"])
    if (e["kind"] == "distill")
      origin = e["fields"]["teacher_origin"];
  EXPECT_NE(origin.find("ONNX file " + teacher), std::string::npos) << show.out;
  EXPECT_NE(origin.find(sha256_file(teacher)), std::string::npos) << origin;

  // A run whose model came from the ONNX file, then that run as the teacher (through the store).
  const std::string base = write("base.json", R"({"name": "onnx-base", "model": {"onnx": ")" + teacher + R"("}, )" +
                                                  small + "}");
  ASSERT_EQ(run_cmd("run " + base + " " + out_dir()).code, 0);
  const std::string kd2 = write("kd2.json", R"({"name": "kd2", "model": {"zoo": "student"},
      "distill": {"teacher": "run:onnx-base"}, )" + small + "}");
  const CmdResult r2 = run_cmd("run " + kd2 + " " + out_dir());
  ASSERT_EQ(r2.code, 0) << r2.out;
  const std::string shown2 = run_cmd("--db " + db() + " show kd2 --json").out;
  EXPECT_NE(shown2.find("ONNX graph " + teacher), std::string::npos) << shown2;

  OnnxBuilder b(13, {1, 28, 28});
  b.init("W", random_tensor({1, 16, 28}, rng));
  b.init("R", random_tensor({1, 16, 4}, rng));
  OnnxBuilder::int1(b.node("LSTM", {"input", "W", "R"}, {"y"}, "lstm1"), "hidden_size", 4);
  b.output("y");
  const std::string lstm = b.save((m_dir / "lstm.onnx").string());
  const std::string bad = write("bad.json", R"({"model": {"zoo": "student"}, "distill": {"teacher": ")" + lstm + R"("}})");
  const CmdResult v = run_cmd("validate " + bad);
  EXPECT_EQ(v.code, 2) << v.out;
  EXPECT_NE(v.out.find("distill.teacher"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("node 'lstm1' (LSTM)"), std::string::npos) << v.out;
}

}  // namespace
}  // namespace lathe::test
