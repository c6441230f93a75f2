// Sweep definitions: grid sizes and order, seeds repeated innermost, random draws within their
// ranges and reproducible from the seed (log-uniform spread on the log scale, checked against
// the Rng stream directly), integer knobs rounded, and malformed definitions refused naming the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/run/sweep_definition.h"

namespace lathe {
namespace {

using nlohmann::json;

json base_config() {
  return {{"name", "base"}, {"seed", 7}, {"model", {{"zoo", "mlp"}}}, {"train", {{"epochs", 1}}}};
}

json definition(json extra) {
  json d = {{"name", "study"}, {"config", base_config()}};
  d.update(extra);
  return d;
}

std::string message_of(const json& def) {
  try {
    plan_sweep_definition(def, "");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(SweepDefinition, GridIsTheCartesianProductLastKnobFastest) {
  const SweepPlan p = plan_sweep_definition(
      definition({{"grid", {{"train.optimizer.lr", {0.01, 0.1}}, {"train.epochs", {1, 2, 3}}}}}), "");
  EXPECT_EQ(p.name, "study");
  ASSERT_EQ(p.members.size(), 6u);
  // Knobs in path order: train.epochs outermost, train.optimizer.lr fastest.
  EXPECT_EQ(p.members[0].sets, (std::vector<std::string>{"train.epochs=1", "train.optimizer.lr=0.01"}));
  EXPECT_EQ(p.members[1].sets, (std::vector<std::string>{"train.epochs=1", "train.optimizer.lr=0.1"}));
  EXPECT_EQ(p.members[5].sets, (std::vector<std::string>{"train.epochs=3", "train.optimizer.lr=0.1"}));
  EXPECT_EQ(p.members[5].name, "base epochs=3 lr=0.1");
  EXPECT_EQ(p.members[5].config["name"], "base epochs=3 lr=0.1");
  EXPECT_EQ(p.members[5].config["train"]["epochs"], 3);
  EXPECT_DOUBLE_EQ(p.members[5].config["train"]["optimizer"]["lr"].get<double>(), 0.1);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(p.members[i].index, i);
  // Four knobs of 2 x 3 x 2 x 2 values: 24 runs.
  const SweepPlan big = plan_sweep_definition(definition({{"grid",
                                                           {{"train.optimizer.lr", {0.01, 0.1}},
                                                            {"train.epochs", {1, 2, 3}},
                                                            {"train.batch_size", {16, 32}},
                                                            {"seed", {1, 2}}}}}),
                                              "");
  EXPECT_EQ(big.members.size(), 24u);
}

TEST(SweepDefinition, RepeatSeedsAreConsecutiveAndInnermost) {
  const SweepPlan p =
      plan_sweep_definition(definition({{"grid", {{"train.epochs", {1, 2}}}}, {"repeat_seeds", 3}}), "");
  ASSERT_EQ(p.members.size(), 6u);
  const int expected_seed[6] = {7, 8, 9, 7, 8, 9};
  const int expected_epochs[6] = {1, 1, 1, 2, 2, 2};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(p.members[i].config["seed"], expected_seed[i]) << i;
    EXPECT_EQ(p.members[i].config["train"]["epochs"], expected_epochs[i]) << i;
  }
}

TEST(SweepDefinition, LogUniformIsInRangeSeededAndSpreadOnTheLogScale) {
  const json def = definition(
      {{"random", {{"train.optimizer.lr", {{"log_uniform", {1e-4, 1e-1}}}}}}, {"trials", 400}, {"seed", 11}});
  const SweepPlan a = plan_sweep_definition(def, ""), b = plan_sweep_definition(def, "");
  ASSERT_EQ(a.members.size(), 400u);
  int below_geometric_middle = 0;
  for (size_t i = 0; i < a.members.size(); ++i) {
    const double lr = a.members[i].config["train"]["optimizer"]["lr"].get<double>();
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-1);
    EXPECT_EQ(a.members[i].sets, b.members[i].sets) << "same seed, same draws";
    below_geometric_middle += lr < std::sqrt(1e-4 * 1e-1);
  }
  // Log-uniform: half below the geometric middle (uniform would put ~3% there).
  EXPECT_GT(below_geometric_middle, 160);
  EXPECT_LT(below_geometric_middle, 240);
  // Trial t's value comes from Rng(seed).fork(t): recompute trial 3 from the stream.
  Rng rng = Rng(11).fork(3);
  const double expected = std::exp(std::log(1e-4) + (std::log(1e-1) - std::log(1e-4)) * rng.uniform());
  EXPECT_NEAR(a.members[3].config["train"]["optimizer"]["lr"].get<double>(), expected, expected * 1e-12);
  // Another seed, other draws.
  json other = def;
  other["seed"] = 12;
  EXPECT_NE(plan_sweep_definition(other, "").members[0].sets, a.members[0].sets);
}

TEST(SweepDefinition, UniformIntegersChoicesAndGridTimesTrials) {
  const SweepPlan p = plan_sweep_definition(definition({{"grid", {{"train.batch_size", {16, 32}}}},
                                                        {"random",
                                                         {{"train.epochs", {{"uniform", {1, 4}}}},
                                                          {"train.optimizer.type", {"sgd", "adamw"}}}},
                                                        {"trials", 5}}),
                                            "");
  ASSERT_EQ(p.members.size(), 10u);
  for (const SweepMember& m : p.members) {
    const json& e = m.config["train"]["epochs"];
    ASSERT_TRUE(e.is_number_integer()) << e;
    EXPECT_GE(e.get<int>(), 1);
    EXPECT_LE(e.get<int>(), 4);
    const std::string opt = m.config["train"]["optimizer"]["type"];
    EXPECT_TRUE(opt == "sgd" || opt == "adamw") << opt;
  }
  // Each grid point sees the same draws for the same trial.
  for (int t = 0; t < 5; ++t)
    EXPECT_EQ(std::vector<std::string>(p.members[t].sets.begin() + 1, p.members[t].sets.end()),
              std::vector<std::string>(p.members[5 + t].sets.begin() + 1, p.members[5 + t].sets.end()));
}

TEST(SweepDefinition, BaseFileRelativeToTheDefinitionAndSetsApplied) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("lathe-sweep-def-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "base.json") << base_config().dump();
  std::ofstream(dir / "sweep.json") << R"({"base": "base.json", "grid": {"train.epochs": [2, 3]}})";
  const SweepPlan p = load_sweep_definition((dir / "sweep.json").string(), {"train.batch_size=16"});
  std::filesystem::remove_all(dir);
  ASSERT_EQ(p.members.size(), 2u);
  EXPECT_EQ(p.name, "base");  // no name: the base config's
  EXPECT_EQ(p.members[1].config["train"]["batch_size"], 16);
  EXPECT_EQ(p.stored_definition["set"], json({"train.batch_size=16"}));
  EXPECT_EQ(p.stored_definition["base_config"]["train"]["batch_size"], 16);
}

TEST(SweepDefinition, MalformedDefinitionsAreRefusedNamingTheField) {
  const auto expect = [](const json& def, const std::string& part) {
    const std::string m = message_of(def);
    EXPECT_NE(m.find(part), std::string::npos) << "expected '" << part << "' in: " << m;
  };
  expect(definition({{"grids", json::object()}}), "sweep.grids: unknown key; allowed: name, base, config");
  expect(definition({{"grid", {{"train.epochz", {1}}}}}), "sweep.grid.train.epochz: not a config field");
  expect(definition({{"grid", {{"train.epochs", json::array()}}}}), "sweep.grid.train.epochs: [];");
  expect(definition({{"grid", {{"train.epochs", 3}}}}), "allowed: a non-empty list of values");
  expect(definition({{"random", {{"train.optimizer.lr", {{"log_uniform", {0, 1}}}}}}, {"trials", 2}}),
         "sweep.random.train.optimizer.lr.log_uniform: [0,1]; allowed: [lo, hi] with 0 < lo < hi");
  expect(definition({{"random", {{"train.optimizer.lr", {{"uniform", {0.5, 0.1}}}}}}, {"trials", 2}}),
         "lo < hi");
  expect(definition({{"random", {{"train.optimizer.lr", {{"normal", {0, 1}}}}}}, {"trials", 2}}),
         "sweep.random.train.optimizer.lr.normal: unknown distribution; allowed: \"uniform\", \"log_uniform\"");
  expect(definition({{"random", {{"train.optimizer.type", {{"uniform", {0, 1}}}}}}, {"trials", 2}}),
         "a range over integer or number fields");
  expect(definition({{"random", {{"train.optimizer.lr", {{"uniform", {0.1, 0.5}}}}}}}), "sweep.trials: missing");
  expect(definition({{"trials", 3}}), "sweep.trials: 3 with no random knobs");
  expect(definition({{"repeat_seeds", 0}}), "sweep.repeat_seeds: 0; allowed: an integer from 1 to 1000");
  expect(definition({{"grid", {{"seed", {1, 2}}}}, {"repeat_seeds", 2}}), "while seed is a swept knob");
  expect(definition({{"grid", {{"train.epochs", {1}}}}, {"random", {{"train.epochs", {1, 2}}}}, {"trials", 1}}),
         "sweep.random.train.epochs: the knob is also in grid");
  expect(json{{"grid", {{"train.epochs", {1}}}}}, "sweep.base: no base config; allowed: exactly one of");
  json both = definition(json::object());
  both["base"] = "x.json";
  expect(both, "both base and config given");
  // A value the config validator refuses names the member and the field.
  expect(definition({{"grid", {{"train.epochs", {1, 0}}}}}), "sweep member 1 (base epochs=0):\ntrain.epochs");
  expect(json::array(), "allowed: a JSON object");
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

// The definitions kept in the repository (experiments/sweeps/) plan; issue 17's study is the
// mlp pruned at 4 ratios x 3 seeds, seeds innermost, each run named by its ratio and seed.
TEST(SweepDefinition, RepositoryDefinitionsPlanAndTheStudyIsFourRatiosTimesThreeSeeds) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(LATHE_SOURCE_DIR "/experiments/sweeps")) {
    if (e.path().extension() != ".json")
      continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW(load_sweep_definition(e.path().string()));
    ++n;
  }
  EXPECT_GE(n, 1);
  const SweepPlan p = load_sweep_definition(LATHE_SOURCE_DIR "/experiments/sweeps/mlp-prune-study.json",
                                            {"train.epochs=1", "prune.finetune_epochs=1"});
  EXPECT_EQ(p.name, "mlp-prune-study");
  ASSERT_EQ(p.members.size(), 12u);
  const char* ratios[] = {"0.3", "0.5", "0.7", "0.9"};
  for (int r = 0; r < 4; ++r)
    for (int s = 0; s < 3; ++s) {
      const SweepMember& m = p.members[static_cast<size_t>(r * 3 + s)];
      EXPECT_EQ(m.name, std::string("mlp-prune ratio=") + ratios[r] + " seed=" + std::to_string(s));
      EXPECT_EQ(m.config["model"]["zoo"], "mlp");
      EXPECT_EQ(m.config["prune"]["method"], "l1-unstructured");
      EXPECT_DOUBLE_EQ(m.config["prune"]["ratio"].get<double>(), std::stod(ratios[r]));
      EXPECT_EQ(m.config["seed"], s);
      EXPECT_EQ(m.config["train"]["epochs"], 1);  // the --set shortening reaches every member
      EXPECT_EQ(m.config["prune"]["finetune_epochs"], 1);
    }
}

}  // namespace
}  // namespace lathe
