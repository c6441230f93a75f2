// Run groups: a 3-seed x 4-ratio study folds into 4 groups whose mean and sample std (ddof = 1)
// equal numpy's on the same stored points (read back as raw series, not through the summaries the
// grouping uses); hand-computed golden values; GroupBy parsing and its rejected forms; group curves.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "analysis_test_util.h"
#include "engine/analysis/group_series.h"
#include "engine/analysis/run_groups.h"
#include "engine/core/error.h"
#include "engine/store/store.h"
#include "tests/store/store_test_util.h"

namespace lathe {
namespace {

using test::StoreDir;

void expect_close(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::fabs(want))) << what;
}

TEST(Spread, HandComputedGoldenValues) {
  // mean 0.82; deviations -0.02, 0, 0.02 -> sum of squares 0.0008 / (3 - 1) = 0.0004 -> std 0.02.
  Spread s = spread_of({0.80, 0.82, 0.84});
  EXPECT_EQ(s.n, 3);
  expect_close(s.mean, 0.82, "mean");
  expect_close(s.std, 0.02, "sample std");
  EXPECT_EQ(s.min, 0.80);
  EXPECT_EQ(s.max, 0.84);
  // {2, 4, 4, 4, 5, 5, 7, 9}: mean 5, squared deviations sum to 32 -> 32 / 7 (ddof = 1).
  s = spread_of({2, 4, 4, 4, 5, 5, 7, 9});
  expect_close(s.mean, 5.0, "mean");
  expect_close(s.std, std::sqrt(32.0 / 7.0), "sample std");
  // NaN is left out and not counted; one value has no std.
  s = spread_of({std::nan(""), 3.0});
  EXPECT_EQ(s.n, 1);
  EXPECT_EQ(s.mean, 3.0);
  EXPECT_TRUE(std::isnan(s.std));
  EXPECT_EQ(format_spread(s), "3 (n=1)");
  EXPECT_EQ(format_spread(spread_of({})), "-");
  EXPECT_EQ(format_spread(spread_of({0.80, 0.82, 0.84})), "0.82 \u00b1 0.02 (n=3)");
}

TEST(RunGroups, StudyMatchesNumpyOnStoredPoints) {
  const std::string py = test::numpy_python();
  if (py.empty())
    GTEST_SKIP() << "no python3 with numpy (install python3-numpy: scripts/install-deps.sh does)";
  StoreDir dir;
  const std::vector<std::string> ids = test::write_study(dir.db());
  Store store = Store::open(dir.db());
  const std::vector<RunGroup> groups = group_runs(store, ids, GroupBy{});
  ASSERT_EQ(groups.size(), 4u);
  const char* labels[] = {"prune.ratio=0.25", "prune.ratio=0.5", "prune.ratio=0.75", "prune.ratio=0.9"};
  // The oracle's input: each group's members' last test/accuracy and their model/bytes, read as
  // the raw stored series.
  nlohmann::json input = nlohmann::json::array();
  for (size_t g = 0; g < 4; ++g) {
    EXPECT_EQ(groups[g].label, labels[g]);
    ASSERT_EQ(groups[g].run_ids.size(), 3u) << groups[g].label;
    nlohmann::json acc = nlohmann::json::array(), bytes = nlohmann::json::array(), best = nlohmann::json::array();
    for (const std::string& id : groups[g].run_ids) {
      const std::vector<Point> pts = store.series(id, "test/accuracy");
      ASSERT_EQ(pts.size(), 5u);
      acc.push_back(pts.back().value);
      double mx = pts[0].value;
      for (const Point& p : pts)
        mx = std::max(mx, p.value);
      best.push_back(mx);
      bytes.push_back(store.series(id, "model/bytes").back().value);
    }
    input.push_back({acc, best, bytes});
  }
  const std::string in = dir.file("oracle_in.json");
  std::ofstream(in) << input.dump();
  const test::CmdResult r = test::run_shell(
      py +
      " -c 'import json,sys; import numpy as np; d=json.load(open(sys.argv[1])); "
      "print(json.dumps([[[float(np.mean(v)), float(np.std(v, ddof=1)), float(np.min(v)), float(np.max(v))] "
      "for v in g] for g in d]))' " +
      in);
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json want = nlohmann::json::parse(r.out);
  for (size_t g = 0; g < 4; ++g) {
    const GroupMetric* acc = groups[g].metric("test/accuracy");
    const GroupMetric* bytes = groups[g].metric("model/bytes");
    ASSERT_TRUE(acc && bytes);
    const Spread* got[] = {&acc->last, &acc->best, &bytes->last};
    const char* what[] = {"last test/accuracy", "best test/accuracy", "model/bytes"};
    for (int k = 0; k < 3; ++k) {
      const std::string ctx = std::string(labels[g]) + " " + what[k];
      EXPECT_EQ(got[k]->n, 3) << ctx;
      expect_close(got[k]->mean, want[g][k][0].get<double>(), ctx + " mean");
      expect_close(got[k]->std, want[g][k][1].get<double>(), ctx + " std (ddof=1)");
      expect_close(got[k]->min, want[g][k][2].get<double>(), ctx + " min");
      expect_close(got[k]->max, want[g][k][3].get<double>(), ctx + " max");
    }
    EXPECT_GT(acc->last.std, 0) << "the seeds differ";
  }
}

TEST(RunGroups, ChosenKeysAndAbsentValues) {
  std::vector<RunFacts> runs = {
      {"a", {{"prune.ratio", "0.5"}, {"quant.mode", "qat"}, {"seed", "0"}}, {}},
      {"b", {{"prune.ratio", "0.5"}, {"quant.mode", "ptq-static"}, {"seed", "1"}}, {}},
      {"c", {{"prune.ratio", "0.7"}, {"seed", "0"}}, {}},
  };
  std::vector<RunGroup> g = group_runs(runs, GroupBy::parse("prune.ratio"));
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].label, "prune.ratio=0.5");
  EXPECT_EQ(g[0].run_ids, (std::vector<std::string>{"a", "b"}));
  g = group_runs(runs, GroupBy::parse("quant.mode"));
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].label, "quant.mode=(absent)");  // groups in key order: "(absent)" sorts first
  // Default: everything but the seed -> three groups (quant.mode tells a and b apart).
  g = group_runs(runs, GroupBy::parse(""));
  EXPECT_EQ(g.size(), 3u);
  // Leaving quant.mode out as well folds a and b together.
  g = group_runs(runs, GroupBy::parse("-seed,-quant.mode"));
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].run_ids.size(), 2u);
  // One group for everything says so.
  g = group_runs(runs, GroupBy::parse("train.epochs"));
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].label, "all runs");
}

TEST(RunGroups, GroupsOrderedByKeyNumbersAsNumbers) {
  std::vector<RunFacts> runs = {{"a", {{"train.epochs", "10"}}, {}},
                                {"b", {{"train.epochs", "9"}}, {}},
                                {"c", {{"train.epochs", "10"}}, {}},
                                {"d", {{"train.epochs", "x"}}, {}}};
  const std::vector<RunGroup> g = group_runs(runs, GroupBy::parse("train.epochs"));
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].label, "train.epochs=9");
  EXPECT_EQ(g[1].run_ids, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(g[2].label, "train.epochs=x");
}

TEST(RunGroups, SeedMatchesNestedKeys) {
  EXPECT_TRUE(key_matches("seed", "seed"));
  EXPECT_TRUE(key_matches("data.seed", "seed"));
  EXPECT_FALSE(key_matches("data.reseed", "seed"));
  EXPECT_FALSE(key_matches("seeds", "seed"));
}

TEST(RunGroups, ParseRejectsMixedAndEmptyKeys) {
  try {
    GroupBy::parse("prune.ratio,-seed");
    FAIL() << "mixed forms accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("mixes keys"), std::string::npos) << e.what();
  }
  try {
    GroupBy::parse("prune.ratio,,seed");
    FAIL() << "empty key accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("an empty key"), std::string::npos) << e.what();
  }
  EXPECT_EQ(GroupBy::parse("").describe(), "config without seed, name");
  EXPECT_EQ(GroupBy::parse("a,b").describe(), "a, b");
}

TEST(GroupSeries, AlignsByStepAndCountsMembersPresent) {
  std::vector<std::vector<Point>> members = {
      {{1, 0, 1.0}, {2, 0, 2.0}, {3, 0, 3.0}},
      {{1, 0, 3.0}, {2, 0, 4.0}},
      {{1, 0, 5.0}, {3, 0, 6.0}},
  };
  const std::vector<GroupPoint> g = group_series(members);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].spread.n, 3);
  expect_close(g[0].spread.mean, 3.0, "step 1 mean");
  expect_close(g[0].spread.std, 2.0, "step 1 std: deviations -2, 0, 2 -> 8 / 2 = 4");
  EXPECT_EQ(g[1].spread.n, 2);
  expect_close(g[1].spread.mean, 3.0, "step 2 mean");
  expect_close(g[1].spread.std, std::sqrt(2.0), "step 2 std: (1 + 1) / 1");
  EXPECT_EQ(g[2].spread.n, 2);
  EXPECT_EQ(g[2].spread.min, 3.0);
  EXPECT_EQ(g[2].spread.max, 6.0);
}

TEST(GroupSeries, FromStoreThinsToMaxPointsKeepingTheLast) {
  StoreDir dir;
  const std::vector<std::string> ids = test::write_study(dir.db(), {0.5}, 3);
  Store store = Store::open(dir.db());
  std::vector<GroupPoint> all = group_series(store, ids, "test/accuracy");
  ASSERT_EQ(all.size(), 5u);
  for (const GroupPoint& p : all)
    EXPECT_EQ(p.spread.n, 3);
  std::vector<GroupPoint> thin = group_series(store, ids, "test/accuracy", 3);
  ASSERT_LE(thin.size(), 4u);
  EXPECT_EQ(thin.front().step, 1);
  EXPECT_EQ(thin.back().step, 5);
}

}  // namespace
}  // namespace lathe
