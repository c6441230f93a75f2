// The acceptance on real runs: a 3-seed x 4-ratio prune sweep (the mlp, with training and
// fine-tuning cut to a few hundred samples with --set so it takes well under a minute) folds into
// 4 groups under `lathe-cli compare --group`, whose mean and sample std of the last test/accuracy
// and of model/bytes equal numpy's (np.mean, np.std(ddof=1)) on the numbers the store holds.
#include <gtest/gtest.h>

#include <fstream>

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
  for (const char* r : ratios)
    for (int seed = 0; seed < 3; ++seed) {
      const std::string name = std::string("mlp-prune ratio=") + r + " seed=" + std::to_string(seed);
      const test::CmdResult res =
          run_cmd("run " + std::string(LATHE_SOURCE_DIR) + "/experiments/prune-agp80.json " + out_dir() +
                  " --set model.zoo=mlp --set train.epochs=1 --set prune.finetune_epochs=1 --set data.train_subset=512"
                  " --set data.test_subset=256 --set train.optimizer.lr=0.05 --set prune.ratio=" +
                  r + " --set seed=" + std::to_string(seed) + " --set 'name=" + name + "' --json > /dev/null");
      ASSERT_EQ(res.code, 0) << name << "\n" << res.out;
    }
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
