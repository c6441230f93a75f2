// `lathe-cli cost` and `lathe-cli prices` as a user runs them: the estimate's dollars follow from
// its own measured inputs and the catalog's prices, the recommended interval is Young's, the
// Monte-Carlo cross-check agrees with the closed form, and the catalog shows dates, sources and
// the seed's older figures.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "engine/data/dataset.h"

namespace {

using lathe::test::Cli;
using lathe::test::CmdResult;
using lathe::test::run_cmd;
namespace fs = std::filesystem;

/// The JSON document at the end of a command's output (after any progress lines on stderr).
nlohmann::json last_json(const std::string& out) {
  const size_t at = out.find("\n{");
  return nlohmann::json::parse(at == std::string::npos ? out : out.substr(at + 1));
}

TEST_F(Cli, CostOfAConfigFollowsFromItsMeasuredInputs) {
  if (!fs::exists(lathe::default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("tiny.json", R"({"model": {"zoo": "student"}, "train": {"epochs": 2},
                                                 "data": {"train_subset": 4096, "test_subset": 100}})");
  // Priced as "local" (no projection to another device), with interruptions every second on
  // average so the seconds-long workload sees many: the Monte-Carlo mean then has a small spread.
  const CmdResult r =
      run_cmd("cost " + cfg + " --instance local --interruptions-per-hour 3600 --restart-s 0.5 --steps 8 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json e = last_json(r.out);
  const double work = e["work_s"], ckpt = e["checkpoint_s"];
  EXPECT_GT(work, 0);
  EXPECT_GT(ckpt, 0);
  EXPECT_TRUE(e["work_projected"].get<bool>());  // a config is projected from a few steps, and says so
  EXPECT_EQ(e["work_how"].get<std::string>().find("peak ratio"), std::string::npos);  // measured here, not scaled
  EXPECT_NE(e["work_how"].get<std::string>().find("projected"), std::string::npos);
  EXPECT_EQ(e["on_demand"]["usd"].get<double>(), 0.0);  // your own machine
  const double m = 1.0;
  EXPECT_NEAR(e["spot"]["young_interval_s"].get<double>(), std::sqrt(2 * std::max(ckpt, 1e-3) * m), 1e-9);
  EXPECT_EQ(e["spot"]["recommended_interval_s"], e["spot"]["young_interval_s"]);
  const double expected = e["spot"]["expected_wall_s"], mc = e["spot"]["monte_carlo_wall_s"];
  EXPECT_GE(expected, work);
  EXPECT_NEAR(mc / expected, 1.0, 0.05);
  EXPECT_GT(expected, 1.2 * work);  // interruptions every second cost
  EXPECT_GE(e["usd_vs_interval"].size(), 2u);

  // Priced on another instance, the step time is scaled by the catalog's peak ratio, and says so;
  // the dollars follow from the catalog's prices.
  const CmdResult p3 = run_cmd("cost " + cfg + " --instance p3.2xlarge --steps 8 --json");
  ASSERT_EQ(p3.code, 0) << p3.out;
  const nlohmann::json q = last_json(p3.out);
  EXPECT_NE(q["work_how"].get<std::string>().find("projected to p3.2xlarge by the fp32 peak ratio"), std::string::npos);
  EXPECT_NE(q["work_how"].get<std::string>().find("TFLOP/s per device)"), std::string::npos);
  EXPECT_NEAR(q["on_demand"]["usd"].get<double>(), 3.06 * q["work_s"].get<double>() / 3600, 1e-12);
  EXPECT_NEAR(q["spot_no_interruptions_usd"].get<double>(), 0.92 * q["work_s"].get<double>() / 3600, 1e-12);
}

TEST_F(Cli, CostOfARecordedRunUsesItsWallTime) {
  if (!fs::exists(lathe::default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("tiny.json", R"({"name": "priced", "model": {"zoo": "student"}, "train": {"epochs": 1},
                                                 "data": {"train_subset": 256, "test_subset": 100}})");
  ASSERT_EQ(run_cmd("run " + cfg + " " + out_dir()).code, 0);
  const CmdResult r = run_cmd("--db " + db() + " cost priced --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json e = last_json(r.out);
  EXPECT_FALSE(e["work_projected"].get<bool>());
  EXPECT_NE(e["work_how"].get<std::string>().find("measured: run"), std::string::npos);
  const auto shown = nlohmann::json::parse(run_cmd("--db " + db() + " list --json").out)["runs"][0];
  EXPECT_GT(e["work_s"].get<double>(), 0);
  EXPECT_EQ(e["instance"], "local");
  EXPECT_EQ(shown["name"], "priced");
}

TEST_F(Cli, CostRefusesBadKnobsNamingThem) {
  const CmdResult r = run_cmd("cost " + write("c.json", "{}") + " --steps 0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--steps"), std::string::npos) << r.out;
  const CmdResult bad = run_cmd("cost " + write("c.json", "{}") + " --instance nope --steps 1");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("p3.2xlarge"), std::string::npos) << bad.out;  // lists the catalog's names
}

TEST_F(Cli, PricesListDatesSourcesAndTheSeedsOlderFigures) {
  const CmdResult r = run_cmd("prices --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json c = nlohmann::json::parse(r.out);
  bool seen_p3 = false;
  for (const auto& i : c["instances"]) {
    EXPECT_FALSE(i["price_date"].get<std::string>().empty()) << i["name"];
    EXPECT_FALSE(i["source"].get<std::string>().empty()) << i["name"];
    if (i["name"] == "p3.2xlarge") {
      seen_p3 = true;
      ASSERT_EQ(i["history"].size(), 1u);
      EXPECT_EQ(i["history"][0]["spot_usd_per_hour"], 0.918);
      EXPECT_NE(i["spot_usd_per_hour"], 0.918);  // today's figure differs, so both are shown
    }
  }
  EXPECT_TRUE(seen_p3);
  EXPECT_NE(run_cmd("prices").out.find("earlier figure"), std::string::npos);
}

}  // namespace
