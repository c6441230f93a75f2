// `lathe-cli scaling RUN`: the projection of a recorded 1-rank run, checked against the ring model
// worked out here from the run's own recorded figures (show --json): 1 rank reproduces the run's
// samples/s, 4 ranks add 2 x 3/4 x 4 x params bytes / bus bandwidth, less the hidden share, to the
// step. Out-of-range flags are refused naming the flag. The measured rate and exposed communication
// are the run's medians after the first sample: a run whose last sample is an outlier projects as
// its steady state.
#include <algorithm>

#include "engine/data/dataset.h"
#include "engine/store/run_writer.h"
#include "engine/store/store.h"
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
  const double params = shown["metrics"]["model/params"]["last"];
  // The run's steady rate: the median of its samples after the first, worked out here.
  std::vector<double> rates;
  {
    const Store store = Store::open(db(), Store::read_only_options());
    for (const Point& p : store.series(store.resolve_run("tiny"), "train/samples_per_s"))
      rates.push_back(p.value);
  }
  ASSERT_GE(rates.size(), 3u);
  rates.erase(rates.begin());
  std::sort(rates.begin(), rates.end());
  const size_t n = rates.size();
  const double sps = n % 2 ? rates[n / 2] : (rates[n / 2 - 1] + rates[n / 2]) / 2;
  const double batch = shown["config"]["train"]["batch_size"];

  const CmdResult r = run_cmd("--db " + db() + " scaling tiny --bus-gbps 2 --hidden 0.25 --ranks 1,4 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["projected"], true);
  EXPECT_EQ(j["grad_bytes"].get<double>(), 4 * params);
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_NEAR(j["samples_per_s"].get<double>(), sps, 1e-9 * sps);
  EXPECT_NE(j["measured_how"].get<std::string>().find("median of " + std::to_string(n) + " train/samples_per_s"),
            std::string::npos)
      << j["measured_how"];
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

TEST_F(Cli, ScalingTakesTheRunsSteadyRateNotAnOutlierLastSample) {
  // A recorded 2-rank run whose first interval is warm-up and whose last one is disturbed (a tenth
  // of the rate, 50x the communication): the projection stands on the medians in between.
  {
    RunWriter w(db());
    RunInfo info;
    info.name = "outlier";
    info.backend = "cpu";
    info.config = {{"train", {{"batch_size", 64}}}, {"compute", {{"devices", 2}}}};
    w.begin_run(info);
    const std::vector<double> rate = {300, 1000, 1040, 980, 1010, 990, 1020, 100};
    const std::vector<double> comm = {0.05, 0.010, 0.011, 0.009, 0.010, 0.012, 0.010, 0.5};
    for (size_t i = 0; i < rate.size(); ++i) {
      const int64_t step = 10 * static_cast<int64_t>(i + 1);
      w.sample("train/samples_per_s", step, 100.0 * step, rate[i]);
      w.sample("dist/comm_s", step, 100.0 * step, comm[i]);
      w.sample("dist/world_size", step, 100.0 * step, 2);
      w.sample("dist/bytes_per_step", step, 100.0 * step, 1e6);
    }
    w.finish(RunStatus::finished);
  }
  const CmdResult r = run_cmd("--db " + db() + " scaling outlier --bus-gbps 1 --ranks 1,2 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  // Medians of the 7 samples after the first: 1000 samples/s and 10 ms (the last sample says 100
  // and 500 ms, which would project a 1-rank step of 1.28 s less 0.5 s).
  EXPECT_EQ(j["samples_per_s"].get<double>(), 1000);
  EXPECT_EQ(j["comm_s"].get<double>(), 0.010);
  const double compute = 2 * 64 / 1000.0 - 0.010;
  EXPECT_NEAR(j["compute_s"].get<double>(), compute, 1e-12);
  EXPECT_NEAR(j["points"][0]["samples_per_s"].get<double>(), 64 / compute, 1e-9);
  // Fitted overlap from the steady exposure: the 2-rank all-reduce of 1 MB at 1 GB/s is 1 ms, so
  // 10 ms exposed is none hidden.
  EXPECT_EQ(j["hidden_fraction"].get<double>(), 0);
  EXPECT_NE(j["measured_how"].get<std::string>().find("median of 7 train/samples_per_s and 7 dist/comm_s"),
            std::string::npos)
      << j["measured_how"];
  const CmdResult text = run_cmd("--db " + db() + " scaling outlier --bus-gbps 1");
  EXPECT_NE(text.out.find("1000 samples/s"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace lathe::test
