// ONNX models as distillation teachers (issue 18 item 1): an ONNX teacher file (graph and weights
// from the file) and a teacher run whose model came from model.onnx (the file's graph, the run's
// saved weights) give the logits of the teacher evaluated directly; the teacher cache keys on the
// ONNX file's bytes, so a changed file is never served the old teacher's outputs; bad ONNX teachers
// are refused at validation naming distill.teacher.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/data/dataset.h"
#include "engine/exec/batch_loop.h"
#include "engine/io/onnx/onnx_export.h"
#include "engine/io/onnx/onnx_import.h"
#include "engine/nn/model_io.h"
#include "engine/nn/zoo.h"
#include "engine/run/data_setup.h"
#include "engine/run/stage_distill.h"
#include "engine/run/trainer.h"
#include "tests/distill/distill_run_fixture.h"
#include "tests/support/config_from.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using test::config_from;

/// A small conv net with BatchNorm (running statistics away from 0 and 1), random weights.
std::unique_ptr<Model> small_teacher(Backend& be, uint64_t seed) {
  auto net = build_model_from_layers(nlohmann::json::parse(R"([
    {"name": "conv", "type": "conv2d", "out": 4, "kernel": 3, "stride": 2},
    {"name": "bn", "type": "batchnorm2d"}, {"name": "act", "type": "relu"},
    {"name": "flat", "type": "flatten"}, {"name": "fc", "type": "linear", "out": 10}])"),
                                     {1, 28, 28});
  Rng rng(seed);
  net->create_params(be, DType::f32, rng);
  for (const NamedBuffer& b : net->named_buffers())
    for (int64_t i = 0; i < b.buffer->value.numel(); ++i)
      b.buffer->value.set_flat(i, 0.5 + 0.125 * static_cast<double>(i));
  return net;
}

/// Makes the model answer `cls` for every image (fc bias +100 on that class).
void always(Model& net, int cls) {
  for (const NamedParam& p : net.named_params())
    if (p.name == "fc.bias")
      p.param->value.set_flat(cls, 100.0);
}

Tensor logits(Model& m, Backend& be, const Tensor& x) {
  LayerContext ctx{be, false};
  return m.forward(ctx, x).contiguous_copy();
}

class OnnxTeacher : public test::DistillRunFixture {
 protected:
  OnnxTeacher() : DistillRunFixture("lathe-onnx-teacher-") {}
  /// The distillation stage of `cfg` prepared on `be` (the teacher loaded as a run would).
  std::unique_ptr<DistillStage> prepare(const ExperimentConfig& cfg, Backend& be) {
    m_data = load_run_data(cfg.data);
    m_student = build_zoo_model("student", {1, 28, 28}, 10);
    Rng rng(5);
    m_student->create_params(be, DType::f32, rng);
    return prepare_distill_stage(cfg, be, m_data, *m_student, {});
  }
  TrainTest m_data;
  std::unique_ptr<Model> m_student;
};

TEST_F(OnnxTeacher, AnOnnxTeacherFileGivesTheTeachersOwnLogits) {
  ReferenceBackend be;
  auto net = small_teacher(be, 11);
  const std::string file = (m_dir / "teacher.onnx").string();
  export_onnx(*net, be, file);
  const auto stage = prepare(config_from(tiny({"distill.teacher=" + file})), be);
  ASSERT_TRUE(stage && stage->teacher);
  EXPECT_EQ(stage->spec.kind, TeacherSpec::Kind::onnx);
  EXPECT_EQ(stage->onnx_sha256, sha256_file(file));
  EXPECT_NE(stage->saved.origin.find(sha256_file(file)), std::string::npos) << stage->saved.origin;
  Rng rng(4);
  const Tensor x = test::random_tensor({6, 1, 28, 28}, rng);
  // The teacher the distiller runs against, the model written to the file, and the file imported
  // directly: the same logits, bit for bit.
  const Tensor want = logits(*net, be, x);
  EXPECT_EQ(test::mismatches(logits(*stage->teacher, be, x), want), 0);
  OnnxImport direct = import_onnx(file);
  Rng other(77);
  direct.model->create_params(be, DType::f32, other);
  load_onnx_weights(*direct.model, be, direct);
  EXPECT_EQ(test::mismatches(logits(*direct.model, be, x), want), 0);
}

TEST_F(OnnxTeacher, ARunWhoseModelCameFromOnnxTeachesWithItsTrainedWeights) {
  ReferenceBackend be;
  auto net = small_teacher(be, 12);
  const std::string file = (m_dir / "base.onnx").string();
  export_onnx(*net, be, file);
  const RunSummary t = run_experiment(config_from(tiny({"model.zoo=onnx", "model.onnx=" + file, "name=t"})), {});
  const std::string weights = t.run_dir + "/model.safetensors";
  ASSERT_TRUE(fs::exists(weights));

  const auto stage = prepare(config_from(tiny({"distill.teacher=run:" + t.run_id})), be);
  ASSERT_TRUE(stage && stage->teacher);
  EXPECT_EQ(stage->onnx_file, file);
  EXPECT_EQ(stage->onnx_sha256, sha256_file(file));
  // Reference: the ONNX file's graph with the run's trained weights, loaded by hand.
  OnnxImport graph = import_onnx(file);
  Rng other(78);
  graph.model->create_params(be, DType::f32, other);
  load_model_weights(*graph.model, be, weights);
  Rng rng(6);
  const Tensor x = test::random_tensor({6, 1, 28, 28}, rng);
  const Tensor want = logits(*graph.model, be, x);
  EXPECT_EQ(test::mismatches(logits(*stage->teacher, be, x), want), 0);
  EXPECT_GT(test::mismatches(logits(*net, be, x), want), 0);  // the trained weights, not the file's

  // A whole distillation from it measures the teacher the run measured.
  RunOptions o;
  o.write_run_dir = false;
  const RunSummary s = run_experiment(config_from(tiny({"distill.teacher=run:" + t.run_id})), o);
  EXPECT_DOUBLE_EQ(s.final_metrics.at("distill/teacher_accuracy"), t.final_metrics.at("test/accuracy"));
}

TEST_F(OnnxTeacher, AChangedOnnxFileIsNotServedTheCachedOutputsOfTheOldOne) {
  ReferenceBackend ref;
  const std::string file = (m_dir / "teacher.onnx").string(), cache = (m_dir / "teacher.cache").string();
  auto a = small_teacher(ref, 13), b = small_teacher(ref, 13);
  always(*a, 1);  // teacher A answers class 1, teacher B class 3: their accuracies are the classes' shares
  always(*b, 3);
  const std::vector<std::string> distill = {"distill.teacher=" + file, "distill.teacher_cache=" + cache};
  export_onnx(*a, ref, file);  // validation reads the file
  const ExperimentConfig cfg = config_from(tiny(distill));
  const TrainTest data = load_run_data(cfg.data);
  const double acc_a = evaluate(*a, ref, data.test, 100).accuracy, acc_b = evaluate(*b, ref, data.test, 100).accuracy;
  ASSERT_NE(acc_a, acc_b);

  RunOptions o;
  o.write_run_dir = false;
  const RunSummary first = run_experiment(cfg, o);
  ASSERT_TRUE(fs::exists(cache));
  EXPECT_DOUBLE_EQ(first.final_metrics.at("distill/teacher_accuracy"), acc_a);
  const RunSummary again = run_experiment(cfg, o);  // same file: served from the cache, same student
  EXPECT_DOUBLE_EQ(again.final_metrics.at("distill/teacher_accuracy"), acc_a);
  EXPECT_EQ(again.final_metrics.at("train/loss"), first.final_metrics.at("train/loss"));

  export_onnx(*b, ref, file);  // same path, other bytes
  const RunSummary changed = run_experiment(cfg, o);
  EXPECT_DOUBLE_EQ(changed.final_metrics.at("distill/teacher_accuracy"), acc_b);
  EXPECT_NE(changed.final_metrics.at("train/loss"), first.final_metrics.at("train/loss"));
}

TEST(OnnxTeacherCacheKey, NamesTheOnnxFilesDigestAndTheWeights) {
  const std::string base = teacher_cache_key("cpu", "taps:", "", "");
  EXPECT_EQ(base.find("onnx:"), std::string::npos);
  const std::string a = teacher_cache_key("cpu", "taps:", "w1", "o1");
  EXPECT_NE(a.find("onnx:o1"), std::string::npos) << a;
  EXPECT_NE(a.find("weights:w1"), std::string::npos) << a;
  EXPECT_NE(a, teacher_cache_key("cpu", "taps:", "w1", "o2"));  // same weights, other graph file
  EXPECT_NE(a, teacher_cache_key("cpu", "taps:", "w2", "o1"));
  EXPECT_NE(a, teacher_cache_key("cpu", "taps:", "w1", ""));
}

TEST(OnnxTeacherConfig, BadOnnxTeachersAreRefusedNamingTheField) {
  EXPECT_EQ(parse_teacher_spec("t.onnx").kind, TeacherSpec::Kind::onnx);
  EXPECT_EQ(parse_teacher_spec("t.safetensors").kind, TeacherSpec::Kind::file);
  try {
    config_from({"distill.teacher=/nonexistent/teacher.onnx"});
    FAIL() << "a missing ONNX teacher passed validation";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("distill.teacher"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/nonexistent/teacher.onnx"), std::string::npos) << e.what();
  }
  const fs::path dir = fs::temp_directory_path() / ("lathe-onnx-teacher-cfg-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  test::OnnxBuilder bld(13, {1, 28, 28});
  Rng rng(1);
  bld.init("W", test::random_tensor({1, 16, 28}, rng));
  bld.init("R", test::random_tensor({1, 16, 4}, rng));
  test::OnnxBuilder::int1(bld.node("LSTM", {"input", "W", "R"}, {"y"}, "lstm1"), "hidden_size", 4);
  bld.output("y");
  const std::string lstm = bld.save((dir / "lstm.onnx").string());
  try {
    config_from({"distill.teacher=" + lstm});
    FAIL() << "an LSTM teacher passed validation";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("distill.teacher"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("node 'lstm1' (LSTM)"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
  try {
    config_from({"distill.teacher=teacher.pt"});
    FAIL() << "a .pt teacher passed validation";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(".onnx model file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
