// The acceptance on real runs: a 3-seed x 4-ratio prune sweep (experiments/sweeps/
// mlp-prune-study.json run by `lathe-cli sweep`, with training and fine-tuning cut to a few hundred
// samples with --set so it takes well under a minute) folds into
// 4 groups under `lathe-cli compare --group`, whose mean and sample std of the last test/accuracy
// and of model/bytes equal numpy's (np.mean, np.std(ddof=1)) on the numbers the store holds.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "cli_test_util.h"
#include "engine/store/store.h"
#include "tests/analysis/analysis_test_util.h"

namespace lathe {
namespace {

using test::run_cmd;

class CliStudy : public test::Cli {};

TEST_F(CliStudy, PruneSweepGroupsMatchNumpy) {
  const std::string py = test::numpy_python();
  if (py.empty())
    GTEST_SKIP() << "no python3 with numpy (install python3-numpy: scripts/install-deps.sh does)";
  const char* ratios[] = {"0.3", "0.5", "0.7", "0.9"};
  // The study as the repository defines it (experiments/sweeps/mlp-prune-study.json, as
  // scripts/readme-screenshots.sh runs it): 12 child runs "mlp-prune ratio=R seed=S", one at a time.
  const test::CmdResult sweep =
      run_cmd("sweep " + std::string(LATHE_SOURCE_DIR) + "/experiments/sweeps/mlp-prune-study.json --jobs 1 " +
              out_dir() +
              " --set train.epochs=1 --set prune.finetune_epochs=1 --set data.train_subset=512"
              " --set data.test_subset=256 --json");
  ASSERT_EQ(sweep.code, 0) << sweep.out;
  const test::CmdResult list = run_cmd("--db " + db() + " list --status finished --json");
  ASSERT_EQ(list.code, 0) << list.out;
  const nlohmann::json listed = nlohmann::json::parse(list.out);
  std::set<std::string> names;
  for (const auto& r : listed["runs"])
    names.insert(r["name"].get<std::string>());
  for (const char* r : ratios)
    for (int seed = 0; seed < 3; ++seed)
      EXPECT_EQ(names.count(std::string("mlp-prune ratio=") + r + " seed=" + std::to_string(seed)), 1u);
  ASSERT_EQ(names.size(), 12u) << list.out;
  const test::CmdResult cmp = run_cmd("--db " + db() + " compare --group --json");
  ASSERT_EQ(cmp.code, 0) << cmp.out;
  const nlohmann::json groups = nlohmann::json::parse(cmp.out)["groups"];
  ASSERT_EQ(groups.size(), 4u) << cmp.out;
  // The oracle's input: per group, each member's last stored test/accuracy and model/bytes.
  Store store = Store::open(db(), Store::read_only_options());
  nlohmann::json input = nlohmann::json::array();
  for (const auto& g : groups) {
    ASSERT_EQ(g["runs"].size(), 3u) << g["label"];
    nlohmann::json acc = nlohmann::json::array(), bytes = nlohmann::json::array();
    for (const auto& id : g["runs"]) {
      acc.push_back(store.series(id.get<std::string>(), "test/accuracy").back().value);
      bytes.push_back(store.series(id.get<std::string>(), "model/bytes").back().value);
    }
    input.push_back({acc, bytes});
  }
  const std::string in = (m_dir / "oracle.json").string();
  std::ofstream(in) << input.dump();
  const test::CmdResult r =
      test::run_shell(py +
                      " -c 'import json,sys; import numpy as np; d=json.load(open(sys.argv[1])); "
                      "print(json.dumps([[[float(np.mean(v)), float(np.std(v, ddof=1))] for v in g] for g in d]))' " +
                      in);
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json want = nlohmann::json::parse(r.out);
  for (size_t g = 0; g < 4; ++g) {
    EXPECT_EQ(groups[g]["label"], std::string("prune.ratio=") + ratios[g]);
    const char* metrics[] = {"test/accuracy", "model/bytes"};
    for (int k = 0; k < 2; ++k) {
      const nlohmann::json& last = groups[g]["metrics"][metrics[k]]["last"];
      const double mean = want[g][k][0].get<double>(), sd = want[g][k][1].get<double>();
      EXPECT_EQ(last["n"], 3);
      EXPECT_NEAR(last["mean"].get<double>(), mean, 1e-12 * std::max(1.0, std::fabs(mean))) << metrics[k];
      EXPECT_NEAR(last["std"].is_null() ? 0.0 : last["std"].get<double>(), sd, 1e-9 * std::max(1.0, std::fabs(mean)))
          << metrics[k];
    }
  }
}

}  // namespace
}  // namespace lathe
