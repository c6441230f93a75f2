// The designer's cost panel shows what `lathe-cli cost CONFIG` prints: fed the CLI's measured
// inputs it computes the same on-demand and spot dollars, the same Young interval it recommends
// and the same $-vs-interval curve; run live it measures through lathe-cli cost itself and follows
// a change of the spot scenario at once.
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "gui_test_util.h"
#include "tests/support/run_shell.h"
#include "widgets/ui/cost_panel.h"

namespace lathe::ui {
namespace {

nlohmann::json design() {
  return nlohmann::json::parse(R"({"name": "priced", "model": {"zoo": "student"}, "train": {"epochs": 2},
                                   "data": {"train_subset": 2048, "test_subset": 100},
                                   "cost": {"instance": "p3.2xlarge"}})");
}

}  // namespace

TEST(GuiCostPanel, AgreesWithLatheCliCostOnOneConfig) {
  if (!test::fashion_mnist_present())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  test::GuiTempDir dir;
  const std::string path = dir.file("design.json");
  std::ofstream(path) << design().dump(2);
  const test::CmdResult r = test::run_shell(test::cli_path() + " cost " + path +
                                            " --interruptions-per-hour 2 --restart-s 60 --steps 6 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t json_at = r.out.find("\n{");  // after lathe-cli's progress line on stderr
  const nlohmann::json cli = nlohmann::json::parse(json_at == std::string::npos ? r.out : r.out.substr(json_at + 1));

  CostPanel panel("");  // no lathe-cli: it only computes from what it is given
  panel.setInterruptionsPerHour(2);
  panel.setRestartSeconds(60);
  panel.applyMeasurement(cli);
  ASSERT_TRUE(panel.hasEstimate()) << panel.statusText().toStdString();
  const CostEstimate e = panel.estimate();  // a copy: the panel replaces its estimate on a change
  EXPECT_DOUBLE_EQ(e.on_demand_wall_s, cli["on_demand"]["wall_s"].get<double>());
  EXPECT_DOUBLE_EQ(e.on_demand_usd, cli["on_demand"]["usd"].get<double>());
  EXPECT_DOUBLE_EQ(e.spot_usd_no_interruptions, cli["spot_no_interruptions_usd"].get<double>());
  EXPECT_DOUBLE_EQ(e.spot_wall_s, cli["spot"]["expected_wall_s"].get<double>());
  EXPECT_DOUBLE_EQ(e.spot_usd, cli["spot"]["expected_usd"].get<double>());
  EXPECT_DOUBLE_EQ(e.spot_wall_monte_carlo_s, cli["spot"]["monte_carlo_wall_s"].get<double>());
  // The recommended interval is Young's, as lathe-cli cost recommends: sqrt(2 C M), M = 1/lambda
  // (estimate_cost takes C as at least 1 ms).
  EXPECT_DOUBLE_EQ(e.young_interval_s, cli["spot"]["recommended_interval_s"].get<double>());
  EXPECT_NEAR(e.young_interval_s, std::sqrt(2 * std::max(cli["checkpoint_s"].get<double>(), 1e-3) * 1800.0), 1e-9);
  EXPECT_DOUBLE_EQ(e.daly_interval_s, cli["spot"]["daly_interval_s"].get<double>());
  ASSERT_EQ(e.curve.size(), cli["usd_vs_interval"].size());
  for (size_t i = 0; i < e.curve.size(); ++i) {
    EXPECT_DOUBLE_EQ(e.curve[i].interval_s, cli["usd_vs_interval"][i]["interval_s"].get<double>()) << i;
    EXPECT_DOUBLE_EQ(e.curve[i].usd, cli["usd_vs_interval"][i]["usd"].get<double>()) << i;
  }
  EXPECT_EQ(panel.curvePlot()->graph(0)->dataCount(), static_cast<int>(e.curve.size()));
  EXPECT_TRUE(panel.summaryText().contains("p3.2xlarge")) << panel.summaryText().toStdString();
  EXPECT_TRUE(panel.summaryText().contains("Young")) << panel.summaryText().toStdString();

  // The spot scenario is recomputed at once: four times the interruptions, half Young's interval.
  panel.setInterruptionsPerHour(8);
  EXPECT_NEAR(panel.estimate().young_interval_s, e.young_interval_s / 2, 1e-9 * e.young_interval_s);
  EXPECT_GT(panel.estimate().spot_usd, cli["spot"]["expected_usd"].get<double>());
}

TEST(GuiCostPanel, MeasuresTheDesignThroughLatheCliCost) {
  if (!test::fashion_mnist_present())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  CostPanel panel(QString::fromStdString(test::cli_path()));
  panel.setInterruptionsPerHour(2);
  int updates = 0;
  QObject::connect(&panel, &CostPanel::updated, [&]() { ++updates; });
  panel.setConfig(design());
  ASSERT_TRUE(panel.measureNow());
  ASSERT_TRUE(test::wait_until([&]() { return !panel.measuring(); }, 120000)) << panel.statusText().toStdString();
  ASSERT_TRUE(panel.hasEstimate()) << panel.statusText().toStdString();
  EXPECT_EQ(updates, 1);
  const CostInputs& in = panel.inputs();
  EXPECT_EQ(in.instance->name, "p3.2xlarge");
  EXPECT_GT(in.work_s, 0);
  EXPECT_GT(in.checkpoint_s, 0);
  EXPECT_NE(in.work_how.find("projected to p3.2xlarge"), std::string::npos) << in.work_how;
  EXPECT_NEAR(panel.estimate().on_demand_usd, in.instance->on_demand_usd_per_hour * in.work_s / 3600, 1e-12);
  EXPECT_NEAR(panel.estimate().young_interval_s, std::sqrt(2 * std::max(in.checkpoint_s, 1e-3) * 1800.0), 1e-9);
}

}  // namespace lathe::ui
