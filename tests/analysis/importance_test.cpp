// What matters: on a synthetic store where test/accuracy depends on two knobs only (prune.ratio,
// numeric, and quant.calibration, categorical) and not on four others (seed, train.lr, a numeric
// noise knob, a categorical one), those two rank first by the forest's permutation importance and
// the ratio has a strong Spearman rho; Spearman against a hand computation with ties; the forest
// fits a known function; bad input is rejected naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "engine/analysis/importance.h"
#include "engine/analysis/random_forest.h"
#include "engine/core/error.h"
#include "engine/store/run_writer.h"
#include "engine/store/store.h"
#include "tests/store/store_test_util.h"

namespace lathe {
namespace {

TEST(Spearman, HandComputedWithTies) {
  // ranks of b = 1, 2, 3.5, 5, 3.5; deviations from 3: a -2 -1 0 1 2, b -2 -1 .5 2 .5;
  // sum ab = 8, sum aa = 10, sum bb = 9.5 -> 8 / sqrt(95).
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 8 / std::sqrt(95.0), 1e-12);
  EXPECT_NEAR(spearman({1, 2, 3}, {30, 20, 10}), -1.0, 1e-12);
  EXPECT_TRUE(std::isnan(spearman({1, 1, 1}, {1, 2, 3})));
}

TEST(RandomForest, FitsAStepAndRanksTheFeatureThatMatters) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (int i = 0; i < 200; ++i) {
    x.push_back({u(rng), u(rng), u(rng)});
    y.push_back(x.back()[1] > 0.5 ? 1.0 : 0.0);
  }
  RandomForest f;
  f.fit(x, y, {});
  EXPECT_NEAR(f.predict({0.5, 0.9, 0.5}), 1.0, 0.1);
  EXPECT_NEAR(f.predict({0.5, 0.1, 0.5}), 0.0, 0.1);
  const auto& imp = f.permutation_importance();
  EXPECT_GT(imp[1], 10 * std::max(imp[0], imp[2]));
  EXPECT_THROW(f.fit({{1.0}, {2.0, 3.0}}, {1, 2}), ConfigError);
  EXPECT_THROW(f.fit({{1.0}, {NAN}}, {1, 2}), ConfigError);
}

TEST(Importance, TwoKnobsThatMatterComeFirstOnAStore) {
  test::StoreDir dir;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  const char* calib[] = {"entropy", "minmax", "mse", "percentile"};
  const double calib_effect[] = {0.0, -0.08, 0.03, -0.03};
  const char* sched[] = {"constant", "cosine", "step"};
  std::vector<std::string> ids;
  for (int i = 0; i < 120; ++i) {
    const double ratio = 0.1 * (1 + i % 9);
    const int c = static_cast<int>(u(rng) * 4) % 4;
    RunInfo info;
    info.name = "study";
    info.config = {{"name", "study"},
                   {"seed", i % 5},
                   {"prune", {{"ratio", ratio}}},
                   {"quant", {{"calibration", calib[c]}}},
                   {"train",
                    {{"lr", 0.01 * (1 + static_cast<int>(u(rng) * 5))},
                     {"schedule", sched[static_cast<int>(u(rng) * 3) % 3]},
                     {"noise_knob", u(rng)}}}};
    RunWriter w(dir.db());
    ids.push_back(w.begin_run(info));
    // Accuracy: the ratio and the calibration only, plus a little measurement noise.
    w.sample("test/accuracy", 1, 0, 0.9 - 0.3 * ratio * ratio + calib_effect[c] + 0.002 * (u(rng) - 0.5));
    w.finish(RunStatus::finished);
  }
  Store store = Store::open(dir.db());
  ImportanceOptions o;
  o.metric = "test/accuracy";
  const ImportanceResult r = knob_importance(read_run_facts(store, ids), o);
  EXPECT_EQ(r.runs, 120);
  ASSERT_EQ(r.knobs.size(), 6u);  // seed, ratio, calibration, lr, schedule, noise_knob (not name)
  std::set<std::string> top{r.knobs[0].knob, r.knobs[1].knob};
  EXPECT_EQ(top, (std::set<std::string>{"prune.ratio", "quant.calibration"}))
      << r.knobs[0].knob << ", " << r.knobs[1].knob << ", " << r.knobs[2].knob;
  for (size_t k = 2; k < r.knobs.size(); ++k)
    EXPECT_LT(r.knobs[k].share, 0.05) << r.knobs[k].knob;
  for (const KnobImportance& k : r.knobs) {
    if (k.knob == "prune.ratio") {
      EXPECT_TRUE(k.numeric);
      EXPECT_LT(k.spearman, -0.6);  // more pruning, less accuracy
    }
    if (k.knob == "quant.calibration") {
      EXPECT_FALSE(k.numeric);
      EXPECT_TRUE(std::isnan(k.spearman));
      EXPECT_EQ(k.levels, 4);
    }
  }
  EXPECT_GT(r.r2_train, 0.9);
}

TEST(Importance, RejectsTooFewRunsAndBadStat) {
  RunFacts a{"a", {{"x", "1"}}, {}};
  MetricSummary m;
  m.metric = "acc";
  m.last = 0.5;
  a.summaries.push_back(m);
  ImportanceOptions o;
  o.metric = "acc";
  try {
    knob_importance({a, a}, o);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--metric 'acc': 2 run(s)"), std::string::npos) << e.what();
  }
  o.stat = "median";
  EXPECT_THROW(knob_importance({a, a, a, a}, o), ConfigError);
  o.stat = "last";
  try {
    knob_importance({a, a, a, a}, o);  // x never varies
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no knob varies"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
