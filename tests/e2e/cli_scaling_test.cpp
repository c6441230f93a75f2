// `lathe-cli scaling RUN`: the projection of a recorded 1-rank run, checked against the ring model
// worked out here from the run's own recorded figures (show --json): 1 rank reproduces the run's
// samples/s, 4 ranks add 2 x 3/4 x 4 x params bytes / bus bandwidth, less the hidden share, to the
// step. Out-of-range flags are refused naming the flag.
#include "engine/data/dataset.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/cli_test_util.h"

namespace lathe::test {
namespace {

TEST_F(Cli, ScalingProjectsARecordedRunWithTheRingModel) {
  if (!std::filesystem::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("tiny.json", R"({"name": "tiny", "model": {"zoo": "student"}, "train": {"epochs": 1},
                                                 "data": {"train_subset": 1024, "test_subset": 500}})");
  ASSERT_EQ(run_cmd("run " + cfg + " " + out_dir()).code, 0);
  const auto shown = nlohmann::json::parse(run_cmd("--db " + db() + " show tiny --json").out);
  const double sps = shown["metrics"]["train/samples_per_s"]["last"];
  const double params = shown["metrics"]["model/params"]["last"];
  const double batch = shown["config"]["train"]["batch_size"];

  const CmdResult r = run_cmd("--db " + db() + " scaling tiny --bus-gbps 2 --hidden 0.25 --ranks 1,4 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["projected"], true);
  EXPECT_EQ(j["grad_bytes"].get<double>(), 4 * params);
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_NEAR(j["points"][0]["samples_per_s"].get<double>(), sps, 1e-9 * sps);
  const double compute = batch / sps, allreduce = 2 * 3.0 / 4 * 4 * params / 2e9;
  EXPECT_NEAR(j["points"][1]["allreduce_s"].get<double>(), allreduce, 1e-12);
  EXPECT_NEAR(j["points"][1]["samples_per_s"].get<double>(), 4 * batch / (compute + 0.75 * allreduce), 1e-6 * sps);

  const CmdResult text = run_cmd("--db " + db() + " scaling tiny --bus-gbps 2");
  EXPECT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("projection, not a measurement"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("none assumed"), std::string::npos) << text.out;

  for (const std::string bad : {"--bus-gbps 0", "--bus-gbps 2 --hidden 1.5", "--bus-gbps 2 --ranks 0"}) {
    const CmdResult e = run_cmd("--db " + db() + " scaling tiny " + bad);
    EXPECT_EQ(e.code, 2) << bad;
    EXPECT_NE(e.out.find(bad.substr(bad.rfind("--"), bad.rfind(' ') - bad.rfind("--"))), std::string::npos)
        << bad << ": " << e.out;
  }
}

}  // namespace
}  // namespace lathe::test
