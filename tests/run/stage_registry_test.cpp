// The stage registry and the Stage contract: every section owned once, the pipeline order, each
// stage's fields in the schema under its section, typed parsing with errors naming the field, the
// phase plan assembled from the stages, and save_state / load_state round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "engine/core/error.h"
#include "engine/run/config_schema.h"
#include "engine/run/phase_plan.h"
#include "engine/run/stage_registry.h"
#include "tests/support/config_from.h"

namespace lathe {
namespace {

using test::config_from;

TEST(StageRegistry, SectionsOwnedOnceInPipelineOrder) {
  const auto& stages = stage_prototypes();
  std::vector<std::string> sections;
  for (size_t i = 0; i < stages.size(); ++i) {
    sections.push_back(stages[i]->section());
    if (i > 0)
      EXPECT_LT(stages[i - 1]->order(), stages[i]->order());
  }
  // The built-in stages, in this order; stages in folders of their own (lowrank) come in between
  // without this test naming them.
  const std::vector<std::string> built_in{"distill", "precision", "prune", "quant"};
  std::vector<std::string> seen;
  for (const std::string& s : sections)
    if (std::find(built_in.begin(), built_in.end(), s) != built_in.end())
      seen.push_back(s);
  EXPECT_EQ(seen, built_in);
  EXPECT_EQ(std::set<std::string>(sections.begin(), sections.end()).size(), sections.size()) << "a section twice";
  for (const std::string& s : sections)
    ASSERT_NE(find_stage(s), nullptr) << s;
  EXPECT_EQ(find_stage("train"), nullptr);
  // make_stages() gives fresh instances each time (a stage keeps its run's state).
  auto a = make_stages(), b = make_stages();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a[0].get(), b[0].get());
}

TEST(StageRegistry, StageFieldsAreInTheSchemaUnderTheirSection) {
  std::set<std::string> schema_paths;
  for (const FieldSpec& f : experiment_schema())
    schema_paths.insert(f.path);
  std::map<std::string, size_t> stage_fields;
  for (const auto& stage : stage_prototypes())
    for (const FieldSpec& f : stage->schema_fields()) {
      ++stage_fields[stage->section()];
      EXPECT_EQ(f.path.rfind(stage->section() + ".", 0), 0u) << f.path;
      EXPECT_EQ(f.section, stage->section()) << f.path;
      EXPECT_TRUE(schema_paths.count(f.path)) << f.path;
    }
  EXPECT_EQ(stage_fields["prune"], 16u);
  EXPECT_EQ(stage_fields["distill"], 9u);
  EXPECT_EQ(stage_fields["quant"], 12u);
  // Still one row per path.
  EXPECT_EQ(schema_paths.size(), experiment_schema().size());
}

TEST(StageRegistry, SectionsParseIntoTypedValues) {
  const ExperimentConfig c =
      config_from({"prune.method=nm", "prune.scope=layer", "prune.schedule=agp", "quant.mode=ptq-dynamic",
                   "quant.calibration=entropy", "quant.granularity=per-tensor", "prune.exclude=0, 3"});
  EXPECT_EQ(c.prune.method, PruneMethod::nm);
  EXPECT_EQ(c.prune.scope, PruneScope::layer);
  EXPECT_EQ(c.prune.schedule, PruneSchedule::agp);
  EXPECT_EQ(c.quant.mode, QuantMode::ptq_dynamic);
  EXPECT_EQ(c.quant.calibration, QuantCalibration::entropy);
  EXPECT_EQ(c.quant.granularity, WeightGranularity::per_tensor);
  EXPECT_EQ(c.prune.exclude, (std::vector<std::string>{"0", "3"}));
  EXPECT_TRUE(find_stage("prune")->enabled(c));
  EXPECT_TRUE(find_stage("quant")->enabled(c));
  EXPECT_FALSE(find_stage("distill")->enabled(c));
  EXPECT_FALSE(find_stage("precision")->enabled(c));
  EXPECT_TRUE(find_stage("precision")->enabled(config_from({"train.precision=f16"})));
}

TEST(StageRegistry, CrossFieldErrorsNameTheField) {
  auto message = [](const std::vector<std::string>& sets) {
    try {
      config_from(sets);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({"prune.method=nm", "prune.nm_n=5", "prune.nm_m=4"}).find("prune.nm_n: 5"), std::string::npos);
  EXPECT_NE(message({"prune.exclude=0,,3"}).find("prune.exclude"), std::string::npos);
  EXPECT_NE(message({"prune.sensitivity_pick=true"}).find("prune.sensitivity_pick"), std::string::npos);
}

TEST(StageRegistry, ThePhasePlanComesFromTheStages) {
  const ExperimentConfig c =
      config_from({"distill.teacher=zoo:teacher", "distill.teacher_epochs=2", "train.epochs=3",
                   "prune.method=l1-unstructured", "prune.finetune_epochs=1", "quant.mode=qat", "quant.qat_epochs=1"});
  const std::vector<PlannedPhase> plan = plan_phases(c, 10);
  std::vector<std::pair<std::string, int64_t>> got;
  for (const PlannedPhase& p : plan)
    got.emplace_back(p.name, p.steps);
  const std::vector<std::pair<std::string, int64_t>> want{{"teacher", 20},  {"distill", 30},  {"prune", 0},
                                                          {"finetune", 10}, {"benchmark", 0}, {"calibrate", 1},
                                                          {"qat", 11},      {"benchmark", 0}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(planned_steps(plan), 72);
}

TEST(StageState, PruneMasksRoundTrip) {
  auto stages = make_stages();
  Stage* prune = nullptr;
  for (auto& s : stages)
    if (s->section() == "prune")
      prune = s.get();
  ASSERT_NE(prune, nullptr);
  EXPECT_TRUE(prune->save_state().empty());  // nothing before it runs
  Tensor keep = Tensor::zeros({2, 3}, DType::u8);
  keep.set({0, 1}, 1);
  keep.set({1, 2}, 1);
  StageState st;
  st.json = {{"masks", {"0.weight"}},     {"finetune_steps_done", 17}, {"picked", {{"0", 0.5}}},  {"finetuning", true},
             {"finetune_first_step", 64}, {"dense_accuracy", 0.875},   {"dense_file_bytes", 4096}};
  st.tensors.emplace_back("mask/0.weight", keep);
  prune->load_state(st);
  const StageState back = prune->save_state();
  EXPECT_EQ(back.json, st.json);
  ASSERT_EQ(back.tensors.size(), 1u);
  EXPECT_EQ(back.tensors[0].first, "mask/0.weight");
  EXPECT_EQ(back.tensors[0].second.get({0, 1}), 1);
  EXPECT_EQ(back.tensors[0].second.get({1, 2}), 1);
  EXPECT_EQ(back.tensors[0].second.get({0, 0}), 0);
  // A state naming a mask it does not carry is refused.
  StageState bad;
  bad.json = st.json;
  EXPECT_THROW(prune->load_state(bad), Error);
}

TEST(StageState, StagesWithoutRunStateSayNothing) {
  for (const auto& s : make_stages())
    EXPECT_TRUE(s->save_state().empty()) << s->section();
  // A loss scale for a stage that has no scaler attached is refused, not ignored.
  auto precision = make_stages();
  for (auto& s : precision)
    if (s->section() == "precision") {
      StageState st;
      st.json = {{"loss_scale", 1024.0}, {"good_steps_in_a_row", 3}, {"steps_skipped", 1}};
      EXPECT_THROW(s->load_state(st), Error);
    }
}

}  // namespace
}  // namespace lathe
