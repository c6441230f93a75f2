// The Groups chart has the Live and Compare charts' options (issue 17 item 5): a metric as the x
// axis (each group's mean y against its mean x at the same step), log axes that leave out and
// count what they cannot show, a fixed y range (a bad one refused, the old kept), the right-click
// menu with PNG / SVG export; the group scatter on a log axis leaves out a group at 0.
#include <gtest/gtest.h>

#include <QFileInfo>
#include <set>
#include <stdexcept>

#include "gui_test_util.h"
#include "widgets/ui/compare_view.h"

namespace lathe::ui {
namespace {

std::vector<double> keys(QCPGraph* g) {
  std::vector<double> out;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
    out.push_back(it->key);
  return out;
}
std::vector<double> values(QCPGraph* g) {
  std::vector<double> out;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
    out.push_back(it->value);
  return out;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12) << i;
}

TEST(GuiGroupChart, MetricAsXLogAxesFixedRangeAndExport) {
  test::GuiTempDir dir;
  QStringList ids;
  // Two groups (ratio 0.5, 0.9) of two seeds; cost rises with the step, loss falls (to 0 in B).
  for (double ratio : {0.5, 0.9})
    for (int seed = 0; seed < 2; ++seed) {
      std::vector<double> cost, loss;
      for (int step = 1; step <= 3; ++step) {
        cost.push_back(0.1 * step * (1 + seed));
        loss.push_back(ratio == 0.5 ? 1.0 + 0.2 * seed - 0.2 * (step - 1) : 2.0 - (step - 1));
      }
      ids << QString::fromStdString(test::write_run(dir.db(), "g" + std::to_string(seed),
                                                    {{"seed", seed}, {"prune", {{"ratio", ratio}}}},
                                                    {{"cost/usd", cost}, {"train/loss", loss}}));
    }
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns(ids);
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();
  GroupPanel* panel = view.groupPanel();
  ASSERT_EQ(panel->groups().size(), 2u);
  panel->setMetric("train/loss");
  panel->setCurveX("cost/usd");
  QCustomPlot* plot = panel->plot();
  ASSERT_EQ(plot->graphCount(), 6);  // per group: band low, band high, mean line
  // Which group is A (ratio 0.5): its mean loss starts at 1.1.
  const int a = values(plot->graph(2)).front() < 1.5 ? 2 : 5, b = a == 2 ? 5 : 2;
  expect_near(keys(plot->graph(a)), {0.15, 0.3, 0.45});  // mean cost of the two seeds at each step
  expect_near(values(plot->graph(a)), {1.1, 0.9, 0.7});
  expect_near(values(plot->graph(b)), {2.0, 1.0, 0.0});
  EXPECT_TRUE(plot->xAxis->label().startsWith("cost/usd")) << plot->xAxis->label().toStdString();

  PlotOptions o;
  o.logX = o.logY = true;
  panel->setPlotOptions(o);
  EXPECT_EQ(plot->xAxis->scaleType(), QCPAxis::stLogarithmic);
  EXPECT_EQ(plot->yAxis->scaleType(), QCPAxis::stLogarithmic);
  EXPECT_EQ(panel->hiddenPoints(), 1);  // group B's mean loss of 0
  expect_near(values(plot->graph(b)), {2.0, 1.0});
  EXPECT_GT(plot->yAxis->range().lower, 0);

  o.fixedY = true;
  o.yMin = 0.5;
  o.yMax = 3;
  panel->setPlotOptions(o);
  EXPECT_DOUBLE_EQ(plot->yAxis->range().lower, 0.5);
  EXPECT_DOUBLE_EQ(plot->yAxis->range().upper, 3);
  PlotOptions bad = o;
  bad.yMin = -1;  // not > 0 on a log axis
  EXPECT_THROW(panel->setPlotOptions(bad), std::invalid_argument);
  EXPECT_EQ(panel->plotOptions(), o);

  QMenu* menu = panel->buildPlotMenu();
  std::set<QString> names;
  for (QAction* act : menu->actions())
    names.insert(act->objectName());
  for (const char* n : {"logX", "logY", "autoY", "fixedY", "exportPng", "exportSvg"})
    EXPECT_TRUE(names.count(n)) << n;
  for (QAction* act : menu->actions())
    if (act->objectName() == "logX")
      act->setChecked(false);  // what a click does
  EXPECT_FALSE(panel->plotOptions().logX);
  EXPECT_EQ(plot->xAxis->scaleType(), QCPAxis::stLinear);
  delete menu;

  panel->resize(500, 400);
  const QString png = QString::fromStdString(dir.file("groups.png")), svg = QString::fromStdString(dir.file("g.svg"));
  exportPng(plot, png);
  exportSvg(plot, svg);
  EXPECT_GT(QFileInfo(png).size(), 0);
  EXPECT_GT(QFileInfo(svg).size(), 0);

  // The scatter on the log y axis: group B's last loss (mean 0) cannot be shown.
  panel->setPlotOptions(PlotOptions{false, true, false, 0, 1});
  panel->setScatterAxes("cost/usd", "train/loss");
  EXPECT_EQ(plot->graphCount(), 1);
  EXPECT_EQ(panel->hiddenPoints(), 1);
  panel->setPlotOptions(PlotOptions{});
  EXPECT_EQ(plot->graphCount(), 2);
  EXPECT_EQ(panel->hiddenPoints(), 0);
  // Back to the curves by step: keys are steps again.
  panel->setView(GroupPanel::View::curves);
  panel->setCurveX("step");
  expect_near(keys(plot->graph(2)), {1, 2, 3});
}

}  // namespace
}  // namespace lathe::ui
