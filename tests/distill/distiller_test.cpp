// The whole distillation step: gradients of the student's parameters under KD + feature losses
// checked by central differences in double (through Model::backward's extra gradients at a tapped
// node), the teacher cache giving the same step as a fresh teacher pass, and the parsers' errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/compress/distill/distiller.h"
#include "engine/compress/distill/teacher_source.h"
#include "engine/nn/linear.h"
#include "engine/nn/relu.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

std::unique_ptr<Model> mlp(int64_t in, int64_t hidden, int64_t out) {
  auto m = std::make_unique<Model>(Shape{in});
  m->add("0", std::make_unique<Linear>(in, hidden));
  m->add("1", std::make_unique<ReLU>());
  m->add("2", std::make_unique<Linear>(hidden, out));
  return m;
}

using test::labels_of;

struct DistillFixture {
  ReferenceBackend be;
  std::unique_ptr<Model> student = mlp(6, 5, 4), teacher = mlp(6, 8, 4);
  Tensor x, y;
  DistillOptions opt;
  DistillFixture() {
    Rng rng(21);
    student->create_params(be, DType::f64, rng);
    teacher->create_params(be, DType::f64, rng);
    x = test::random_tensor({3, 6}, rng, DType::f64);
    y = labels_of({0, 3, 2});
    opt.kd = {3.0, 0.6};
    opt.feature_weight = 0.4;
    opt.pairs = {{"1", "1"}};  // hidden 5 -> teacher hidden 8 through a Linear projection
  }
};

/// The scalar the step differentiates, from forward passes only.
double total_loss(DistillFixture& s, Distiller& d, double grad_scale) {
  LayerContext train{s.be, true, 0}, eval{s.be, false, 0};
  const Tensor t_logits = s.teacher->forward(eval, s.x).contiguous_copy();
  const Tensor t_hidden = s.teacher->activation("1").contiguous_copy();
  const Tensor& logits = s.student->forward(train, s.x);
  double loss = kd_loss(logits, t_logits, s.y, s.opt.kd, nullptr, 1).total_sum;
  FeatureProjection& proj = const_cast<FeatureProjection&>(d.projections()[0]);
  Tensor scratch;
  loss += s.opt.feature_weight *
          feature_mse(s.be, proj.forward(train, s.student->activation("1")), t_hidden, 1, 1, nullptr, scratch);
  return grad_scale * loss;
}

TEST(Distiller, StudentAndProjectionGradientsMatchCentralDifferences) {
  DistillFixture s;
  Rng rng(8);
  Distiller d(*s.student, *s.teacher, s.opt, s.be, rng);
  ASSERT_EQ(d.projections().size(), 1u);
  LayerContext ctx{s.be, true, 0};
  Tensor diff;
  const double grad_scale = 1.0 / 3;
  d.forward_backward(*s.student, ctx, s.x, s.y, grad_scale, diff);
  std::vector<std::pair<Param*, Tensor>> analytic;
  for (NamedParam& p : s.student->named_params())
    analytic.push_back({p.param, p.param->grad.contiguous_copy()});
  // Projection gradients are the accumulated ones (one micro-batch here).
  auto proj = d.projection_params();
  ASSERT_EQ(proj.size(), 2u);
  for (NamedParam& p : proj)
    analytic.push_back({p.param, p.param->grad.contiguous_copy()});
  const double eps = 1e-6;
  int checked = 0;
  for (auto& [param, grad] : analytic) {
    for (int64_t i = 0; i < param->value.numel(); ++i) {
      const double v0 = param->value.at_flat(i);
      param->value.set_flat(i, v0 + eps);
      const double fp = total_loss(s, d, grad_scale);
      param->value.set_flat(i, v0 - eps);
      const double fm = total_loss(s, d, grad_scale);
      param->value.set_flat(i, v0);
      const double f0 = total_loss(s, d, grad_scale);
      if (std::fabs((fp - f0) - (f0 - fm)) > 1e-3 * std::fabs(fp - fm) + 1e-12)
        continue;  // a ReLU kink within eps
      ASSERT_NEAR(grad.at_flat(i), (fp - fm) / (2 * eps), 1e-7) << param->name << " element " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 80);
}

TEST(Distiller, FeatureTermChangesTheGradientOfTheLayersBelowTheTap) {
  // With feature_weight 0 the first layer's gradient is the KD one alone; with 0.4 it differs.
  DistillFixture a, b;
  a.opt.feature_weight = 0;
  Rng r1(8), r2(8);
  Distiller da(*a.student, *a.teacher, a.opt, a.be, r1), db(*b.student, *b.teacher, b.opt, b.be, r2);
  LayerContext ca{a.be, true, 0}, cb{b.be, true, 0};
  Tensor d1, d2;
  da.forward_backward(*a.student, ca, a.x, a.y, 1, d1);
  db.forward_backward(*b.student, cb, b.x, b.y, 1, d2);
  const Tensor& g_a = a.student->named_params()[0].param->grad;
  const Tensor& g_b = b.student->named_params()[0].param->grad;
  double diff = 0;
  for (int64_t i = 0; i < g_a.numel(); ++i)
    diff += std::fabs(g_a.at_flat(i) - g_b.at_flat(i));
  EXPECT_GT(diff, 1e-6);
  // The last layer sees no feature gradient (the tap is below it): identical there.
  const Tensor& l_a = a.student->named_params()[2].param->grad;
  const Tensor& l_b = b.student->named_params()[2].param->grad;
  for (int64_t i = 0; i < l_a.numel(); ++i)
    EXPECT_NEAR(l_a.at_flat(i), l_b.at_flat(i), 1e-14);
}

TEST(Distiller, CachedTeacherOutputsGiveTheSameStep) {
  // f32 models (the cache stores f32) on the reference backend.
  ReferenceBackend be;
  Rng rng(1);
  auto student = mlp(6, 5, 4), teacher = mlp(6, 8, 4);
  student->create_params(be, DType::f32, rng);
  teacher->create_params(be, DType::f32, rng);
  const Tensor x = test::random_tensor({4, 6}, rng, DType::f32), y = labels_of({0, 1, 2, 3});
  DistillOptions o;
  o.pairs = {{"1", "1"}};
  Rng pr(3);
  Distiller d(*student, *teacher, o, be, pr);
  TeacherCache cache("k", d.cache_record_sizes());
  d.set_cache(&cache);
  LayerContext ctx{be, true, 0};
  Tensor diff;
  d.forward_backward(*student, ctx, x, y, 0.25, diff);  // miss: teacher runs, cache filled
  const Tensor g1 = student->named_params()[0].param->grad.contiguous_copy();
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(d.take_window().cache_hits, 0);
  d.forward_backward(*student, ctx, x, y, 0.25, diff);  // hit
  EXPECT_EQ(d.take_window().cache_hits, 1);
  EXPECT_TRUE(test::all_close(student->named_params()[0].param->grad, g1, 0, 0));
  // Round trip through a file, and a different key is ignored.
  const std::string path = testing::TempDir() + "/lathe-teacher-cache.bin";
  cache.test_accuracy = 0.9;
  cache.test_samples = 10;
  cache.save(path);
  TeacherCache again("k", d.cache_record_sizes()), other("other", d.cache_record_sizes());
  ASSERT_TRUE(again.load(path));
  EXPECT_EQ(again.size(), 4u);
  EXPECT_DOUBLE_EQ(again.test_accuracy, 0.9);
  EXPECT_FALSE(other.load(path));
  std::remove(path.c_str());
}

TEST(Distiller, RejectsUnknownAndFusedNodes) {
  ReferenceBackend be;
  Rng rng(1);
  auto student = mlp(6, 5, 4), teacher = mlp(6, 8, 4);
  student->create_params(be, DType::f32, rng);
  teacher->create_params(be, DType::f32, rng);
  DistillOptions o;
  o.pairs = {{"1", "nope"}};
  try {
    Distiller d(*student, *teacher, o, be, rng);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("teacher has no node 'nope'"), std::string::npos) << e.what();
  }
  o.pairs = {{"0", "1"}};  // node 0 is fused with its ReLU: only "1" exists as an output
  Distiller d(*student, *teacher, o, be, rng);
  LayerContext ctx{be, true, 0};
  Tensor diff;
  EXPECT_THROW(d.forward_backward(*student, ctx, test::random_tensor({2, 6}, rng), labels_of({0, 1}), 1, diff),
               ConfigError);
}

TEST(DistillParsers, FeaturePairsAndTeacherSpecs) {
  const auto pairs = parse_feature_pairs(" 1:8, 4:4 ");
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].student_node, "1");
  EXPECT_EQ(pairs[0].teacher_node, "8");
  EXPECT_EQ(pairs[1].student_node, "4");
  EXPECT_TRUE(parse_feature_pairs("").empty());
  for (const char* bad : {"1", "1:", ":8", "1:8:9", "1:8,,2:3"})
    EXPECT_THROW(parse_feature_pairs(bad), ConfigError) << bad;
  EXPECT_EQ(parse_teacher_spec("").kind, TeacherSpec::Kind::none);
  EXPECT_EQ(parse_teacher_spec("zoo:teacher").kind, TeacherSpec::Kind::zoo);
  EXPECT_EQ(parse_teacher_spec("run:abc").value, "abc");
  EXPECT_EQ(parse_teacher_spec("/x/model.safetensors").kind, TeacherSpec::Kind::file);
  for (const char* bad : {"zoo:resnet", "run:", "teacher", "model.bin"})
    EXPECT_THROW(parse_teacher_spec(bad), ConfigError) << bad;
  EXPECT_THROW(resolve_saved_teacher(parse_teacher_spec("/nonexistent/model.safetensors"), {}, "runs"), DataError);
  EXPECT_THROW(resolve_saved_teacher(parse_teacher_spec("run:nope"), {}, "/nonexistent-runs"), DataError);
}

// An ONNX teacher: this layer only says where the graph is (the run layer reads the file, through
// run/model_graph.h); build_model_from_section refuses an ONNX section, naming the file and the way.
TEST(TeacherSource, AnOnnxTeacherIsResolvedToItsFileAndBuiltAbove) {
  try {
    build_model_from_section({{"zoo", "onnx"}, {"onnx", "/models/resnet.onnx"}}, {1, 28, 28});
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.onnx = /models/resnet.onnx"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("build_model_graph"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_teacher_spec("/models/resnet.onnx").kind, TeacherSpec::Kind::onnx);
  EXPECT_THROW(resolve_saved_teacher(parse_teacher_spec("/nonexistent/teacher.onnx"), {}, "runs"), DataError);
  const std::string file = ::testing::TempDir() + "teacher-source.onnx";
  { std::ofstream(file) << "x"; }  // only its existence is looked at here
  bool asked = false;
  const RunResolver resolver = [&](const std::string&, const std::string&) {
    asked = true;
    return RunModelFile{};
  };
  const SavedTeacher t = resolve_saved_teacher(parse_teacher_spec(file), resolver, "runs");
  EXPECT_FALSE(asked);
  EXPECT_EQ(t.weights_path, file);
  EXPECT_EQ(t.model_config, nlohmann::json({{"zoo", "onnx"}, {"onnx", file}}));
  EXPECT_EQ(t.origin, "ONNX file " + file);
  std::remove(file.c_str());
}

TEST(TeacherSource, RunReferencesGoThroughTheCallersResolver) {
  std::string asked;
  const RunResolver resolver = [&](const std::string& ref, const std::string& field) {
    asked = ref + " for " + field;
    return RunModelFile{"r1", "/somewhere/model.safetensors", R"({"model": {"zoo": "mlp"}, "seed": 4})", "test store"};
  };
  const SavedTeacher t = resolve_saved_teacher(parse_teacher_spec("run:abc"), resolver, "/nonexistent-runs");
  EXPECT_EQ(asked, "abc for distill.teacher");
  EXPECT_EQ(t.weights_path, "/somewhere/model.safetensors");
  EXPECT_EQ(t.model_config, nlohmann::json({{"zoo", "mlp"}}));
  EXPECT_EQ(t.origin, "test store");
  // A file teacher never asks the resolver.
  asked.clear();
  EXPECT_THROW(resolve_saved_teacher(parse_teacher_spec("/nonexistent/model.safetensors"), resolver, "runs"),
               DataError);
  EXPECT_EQ(asked, "");
}

}  // namespace
}  // namespace lathe
