// The lowrank.* section through the experiment config: the schema declares its fields (so --help
// and the GUI form show them), defaults and typed values, bad values rejected with the field named,
// and the set-up check against the model before anything runs.
#include <gtest/gtest.h>

#include "engine/compress/lowrank/lowrank_config.h"
#include "engine/compress/lowrank/lowrank_stage.h"
#include "engine/nn/zoo.h"
#include "engine/run/phase_plan.h"
#include "engine/run/stage_registry.h"
#include "tests/compress/lowrank_test_models.h"
#include "tests/support/config_from.h"

namespace lathe {
namespace {

ExperimentConfig config_with(const std::vector<std::string>& overrides) {
  std::vector<std::string> sets = {"lowrank.method=svd"};
  sets.insert(sets.end(), overrides.begin(), overrides.end());
  return test::config_from(sets);
}

std::string config_error(const std::vector<std::string>& overrides) {
  try {
    config_with(overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

using test::small_cnn;

TEST(LowRankConfig, ConfigDefaultsAndTypedValues) {
  const ExperimentConfig off = test::config_from({});
  const std::unique_ptr<Stage> stage = new_lowrank_stage();
  EXPECT_FALSE(stage->enabled(off));
  const LowRankConfig& d = stage_config<LowRankConfig>(off, "lowrank");
  EXPECT_EQ(d.method, LowRankMethod::none);
  EXPECT_EQ(d.options.rank, 0);
  EXPECT_EQ(d.options.energy, 0);
  EXPECT_DOUBLE_EQ(d.options.target_bytes_ratio, 0.5);
  EXPECT_EQ(d.options.scope, LowRankScope::layer);
  EXPECT_TRUE(d.options.exclude.empty());
  EXPECT_EQ(d.finetune_epochs, 1);

  const ExperimentConfig cfg = config_with(
      {"lowrank.energy=0.9", "lowrank.scope=global", "lowrank.exclude= 0 , 4", "lowrank.finetune_lr_scale=0.5"});
  const LowRankConfig& c = stage_config<LowRankConfig>(cfg, "lowrank");
  EXPECT_EQ(c.method, LowRankMethod::svd);
  EXPECT_DOUBLE_EQ(c.options.energy, 0.9);
  EXPECT_EQ(c.options.scope, LowRankScope::global);
  EXPECT_EQ(c.options.exclude, (std::vector<std::string>{"0", "4"}));
  EXPECT_DOUBLE_EQ(c.finetune_lr_scale, 0.5);
  EXPECT_TRUE(stage->enabled(cfg));
  // The schema knows the section's fields (so --help and the GUI form show them).
  const FieldSpec* f = find_field("lowrank.target_bytes_ratio");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->section, "lowrank");
}

TEST(LowRankConfig, BadValuesAreRejectedWithTheFieldNamed) {
  EXPECT_NE(config_error({"lowrank.method=pca"}).find("lowrank.method"), std::string::npos);
  EXPECT_NE(config_error({"lowrank.scope=model"}).find("lowrank.scope"), std::string::npos);
  EXPECT_NE(config_error({"lowrank.target_bytes_ratio=1"}).find("lowrank.target_bytes_ratio"), std::string::npos);
  EXPECT_NE(config_error({"lowrank.target_bytes_ratio=0"}).find("lowrank.target_bytes_ratio"), std::string::npos);
  EXPECT_NE(config_error({"lowrank.energy=1.5"}).find("lowrank.energy"), std::string::npos);
  EXPECT_NE(config_error({"lowrank.rank=-1"}).find("lowrank.rank"), std::string::npos);
  EXPECT_NE(config_error({"lowrank.rank=3", "lowrank.energy=0.9"}).find("lowrank.energy"), std::string::npos);
  EXPECT_NE(config_error({"lowrank.exclude=0,,4"}).find("lowrank.exclude"), std::string::npos);
  EXPECT_NE(config_error({"lowrank.finetune_epochs=-1"}).find("lowrank.finetune_epochs"), std::string::npos);
  EXPECT_NE(config_error({"lowrank.ratio=0.5"}).find("lowrank.ratio"), std::string::npos);  // unknown key

  // Set-up checks against the model, before anything runs: an exclusion that is no Linear/Conv2d.
  const ExperimentConfig cfg = config_with({"lowrank.exclude=1"});
  auto be = make_backend("cpu");
  TrainTest data;
  auto model = small_cnn();
  RunOptions options;
  std::unique_ptr<Stage> stage = new_lowrank_stage();
  try {
    stage->prepare(StageSetup{cfg, *be, data, *model, options});
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("lowrank.exclude: '1' is not a linear or conv2d layer"), std::string::npos)
        << e.what();
  }
}

TEST(LowRankConfig, EveryChoiceMapsToItsEnum) {
  // If a choice is added to lowrank.method or lowrank.scope without its enum value, this fails.
  const std::map<std::string, int> expected = {{"lowrank.method=none", static_cast<int>(LowRankMethod::none)},
                                               {"lowrank.method=svd", static_cast<int>(LowRankMethod::svd)},
                                               {"lowrank.scope=layer", static_cast<int>(LowRankScope::layer)},
                                               {"lowrank.scope=global", static_cast<int>(LowRankScope::global)}};
  size_t choices = 0;
  for (const std::string path : {"lowrank.method", "lowrank.scope"}) {
    const FieldSpec* f = find_field(path);
    ASSERT_NE(f, nullptr) << path;
    for (const std::string& choice : f->choices) {
      ++choices;
      const std::string set = path + "=" + choice;
      ASSERT_TRUE(expected.count(set)) << "no enum value checked for " << set;
      const ExperimentConfig cfg = test::config_from({set});  // the stage config lives inside it
      const LowRankConfig& c = stage_config<LowRankConfig>(cfg, "lowrank");
      EXPECT_EQ(path == "lowrank.method" ? static_cast<int>(c.method) : static_cast<int>(c.options.scope),
                expected.at(set))
          << set;
    }
  }
  EXPECT_EQ(choices, expected.size());
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

// A config built in code (the GUI's tests, benches) has no lowrank section stored: the stage is off
// and the phase plan goes on without it, rather than throwing "no typed config".
TEST(LowRankConfig, OffInAConfigBuiltInCode) {
  const ExperimentConfig built;
  const Stage* stage = find_stage("lowrank");
  ASSERT_NE(stage, nullptr);
  EXPECT_FALSE(stage->enabled(built));
  EXPECT_EQ(plan_phases(built, 10).size(), 1u);  // train only
  EXPECT_TRUE(stage->enabled(config_with({})));
}

}  // namespace
}  // namespace lathe
