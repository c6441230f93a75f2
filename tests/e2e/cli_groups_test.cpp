// `lathe-cli compare --group / --group-by` on a 3-seed x 4-ratio study store: 4 groups of 3, each
// metric's mean and sample std (ddof = 1) equal to a hand computation over the stored series;
// chosen keys; a bad --group-by is rejected with the text and what is allowed.
#include <gtest/gtest.h>

#include <cmath>

#include "cli_test_util.h"
#include "engine/store/store.h"
#include "tests/analysis/analysis_test_util.h"

namespace lathe {
namespace {

using test::run_cmd;

class CliGroups : public test::Cli {};

TEST_F(CliGroups, CompareGroupShowsMeanAndSampleStdPerGroup) {
  test::write_study(db());
  const test::CmdResult r = run_cmd("--db " + db() + " compare --group --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["group_by"], "config without seed, name");
  EXPECT_NE(out["std"].get<std::string>().find("ddof=1"), std::string::npos);
  ASSERT_EQ(out["groups"].size(), 4u);
  Store store = Store::open(db(), Store::read_only_options());
  const char* labels[] = {"prune.ratio=0.25", "prune.ratio=0.5", "prune.ratio=0.75", "prune.ratio=0.9"};
  for (size_t g = 0; g < 4; ++g) {
    const nlohmann::json& jg = out["groups"][g];
    EXPECT_EQ(jg["label"], labels[g]);
    ASSERT_EQ(jg["runs"].size(), 3u);
    // By hand: the last stored test/accuracy of each member, its mean and sum of squares / (n - 1).
    std::vector<double> v;
    for (const auto& id : jg["runs"])
      v.push_back(store.series(id.get<std::string>(), "test/accuracy").back().value);
    const double mean = (v[0] + v[1] + v[2]) / 3.0;
    const double var =
        ((v[0] - mean) * (v[0] - mean) + (v[1] - mean) * (v[1] - mean) + (v[2] - mean) * (v[2] - mean)) / 2.0;
    const nlohmann::json& last = jg["metrics"]["test/accuracy"]["last"];
    EXPECT_EQ(last["n"], 3);
    EXPECT_NEAR(last["mean"].get<double>(), mean, 1e-12) << labels[g];
    EXPECT_NEAR(last["std"].get<double>(), std::sqrt(var), 1e-12) << labels[g];
  }
  // The table says which std it is and shows mean ± std (n) per group.
  const test::CmdResult text = run_cmd("--db " + db() + " compare --group");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("4 group(s) of 12 runs"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("sample standard deviation (ddof=1)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(n=3)"), std::string::npos) << text.out;
}

TEST_F(CliGroups, GroupByChosenKeysAndRejectsMixedForms) {
  test::write_study(db(), {0.25, 0.5}, 2);
  // Grouping by the seed instead: 2 groups (seed 0, seed 1) of 2 ratios each.
  test::CmdResult r = run_cmd("--db " + db() + " compare --group-by seed --json");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out["groups"].size(), 2u);
  EXPECT_EQ(out["groups"][0]["label"], "seed=0");
  EXPECT_EQ(out["groups"][0]["runs"].size(), 2u);
  r = run_cmd("--db " + db() + " compare --group-by prune.ratio,-seed");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("mixes keys"), std::string::npos) << r.out;
  // Without --group, compare still needs two runs and says how to compare groups.
  r = run_cmd("--db " + db() + " compare");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--group"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace lathe
