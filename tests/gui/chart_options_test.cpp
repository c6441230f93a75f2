// Chart options (issue 17 item 5): log axes with non-positive points left out and counted, auto /
// fixed y range, any metric as the x axis (pairs worked out by hand here), and PNG / SVG export of
// what the chart shows, checked on the files written (size, pixels, SVG parsed as XML).
#include <gtest/gtest.h>

#include <QImage>
#include <QMenu>
#include <QXmlStreamReader>
#include <set>

#include "gui_test_util.h"
#include "widgets/ui/chart_panel.h"
#include "widgets/ui/compare_view.h"
#include "widgets/ui/live_chart.h"
#include "widgets/ui/plot_options.h"

namespace lathe::ui {
namespace {

std::vector<double> keys(const QCPGraph* g) {
  std::vector<double> out;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
    out.push_back(it->key);
  return out;
}

std::vector<double> values(const QCPGraph* g) {
  std::vector<double> out;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
    out.push_back(it->value);
  return out;
}

}  // namespace

TEST(GuiChartOptions, PairByStepTakesTheXValueAtOrBeforeEachStep) {
  // x logged at steps 1..5, y at 0 (before any x: dropped), 2, 4, 6 (x's last value, step 5), 7 (NaN: dropped).
  const std::vector<Point> cost = {{1, 0, 0.1}, {2, 0, 0.2}, {3, 0, 0.3}, {4, 0, 0.4}, {5, 0, 0.5}};
  const std::vector<Point> acc = {{0, 0, 0.05}, {2, 0, 0.6}, {4, 0, 0.7}, {6, 0, 0.8}, {7, 0, qQNaN()}};
  const auto pairs = pairByStep(cost, acc);
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0], std::make_pair(0.2, 0.6));
  EXPECT_EQ(pairs[1], std::make_pair(0.4, 0.7));
  EXPECT_EQ(pairs[2], std::make_pair(0.5, 0.8));
  EXPECT_TRUE(pairByStep({}, acc).empty());
}

TEST(GuiChartOptions, LogAxisLeavesOutNonPositivePointsAndSaysSo) {
  LiveChart chart("Loss", {"train/loss"});
  chart.append("train/loss", {{1, 10, 2.0}, {2, 20, 0.0}, {3, 30, -1.0}, {4, 40, 0.5}, {5, 50, 0.25}});
  chart.refresh();
  EXPECT_EQ(chart.rawGraph("train/loss")->data()->size(), 5);
  EXPECT_EQ(chart.yAxis->scaleType(), QCPAxis::stLinear);
  PlotOptions o;
  o.logY = true;
  chart.setPlotOptions(o);
  chart.refresh();
  EXPECT_EQ(chart.yAxis->scaleType(), QCPAxis::stLogarithmic);
  EXPECT_NE(dynamic_cast<QCPAxisTickerLog*>(chart.yAxis->ticker().data()), nullptr);
  EXPECT_EQ(chart.xAxis->scaleType(), QCPAxis::stLinear);
  EXPECT_EQ(chart.hiddenPoints(), 2);
  EXPECT_EQ(chart.hiddenNote(), "2 points <= 0 not shown on the log axis");
  EXPECT_EQ(values(chart.rawGraph("train/loss")), (std::vector<double>{2.0, 0.5, 0.25}));
  EXPECT_GT(chart.yAxis->range().lower, 0);  // a log axis never reaches 0
  // Points appended later are filtered too.
  chart.append("train/loss", {{6, 60, 0.0}, {7, 70, 0.125}});
  chart.refresh();
  EXPECT_EQ(chart.hiddenPoints(), 3);
  EXPECT_EQ(chart.rawGraph("train/loss")->data()->size(), 4);
  chart.replot();  // drawing with points <= 0 in the series does not crash
  o.logY = false;
  chart.setPlotOptions(o);
  chart.refresh();
  EXPECT_EQ(chart.hiddenPoints(), 0);
  EXPECT_TRUE(chart.hiddenNote().isEmpty());
  EXPECT_EQ(dynamic_cast<QCPAxisTickerLog*>(chart.yAxis->ticker().data()), nullptr);
  EXPECT_EQ(chart.rawGraph("train/loss")->data()->size(), 7);
}

TEST(GuiChartOptions, FixedYRangeHoldsAndBadRangesAreRefused) {
  LiveChart chart("Loss", {"train/loss"});
  chart.append("train/loss", {{1, 10, 2.0}, {2, 20, 1.0}});
  PlotOptions o;
  o.fixedY = true;
  o.yMin = -3;
  o.yMax = 7;
  chart.setPlotOptions(o);
  chart.append("train/loss", {{3, 30, 50.0}});  // following would widen the range; fixed does not
  chart.refresh();
  EXPECT_DOUBLE_EQ(chart.yAxis->range().lower, -3);
  EXPECT_DOUBLE_EQ(chart.yAxis->range().upper, 7);
  o.fixedY = false;
  chart.setPlotOptions(o);
  chart.refresh();
  EXPECT_GE(chart.yAxis->range().upper, 50.0);  // auto again
  PlotOptions bad;
  bad.fixedY = true;
  bad.yMin = 2;
  bad.yMax = 1;
  EXPECT_THROW(chart.setPlotOptions(bad), std::invalid_argument);
  bad.yMin = 0;
  bad.yMax = 1;
  bad.logY = true;
  try {
    chart.setPlotOptions(bad);
    FAIL() << "a log axis from 0 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("log y axis min must be > 0"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(chart.plotOptions().fixedY);  // the refused options were not kept
}

TEST(GuiChartOptions, MetricAsXAxisInTheLivePanel) {
  ChartPanel panel;
  TailBatch b;
  b.runId = "r1";
  b.reset = true;
  // cost/usd every step, test/accuracy every other step, train/loss at steps 1..4.
  b.series = {{"cost/usd", {{1, 0, 0.01}, {2, 0, 0.02}, {3, 0, 0.03}, {4, 0, 0.04}}},
              {"test/accuracy", {{2, 0, 0.5}, {4, 0, 0.75}}},
              {"train/loss", {{1, 0, 2.0}, {2, 0, 1.0}, {3, 0, 0.5}, {4, 0, 0.25}}}};
  panel.applyBatch(b);
  EXPECT_TRUE(panel.xAxisChoices().contains("cost/usd"));
  EXPECT_TRUE(panel.xAxisChoices().contains("Step"));
  panel.setXMetric("cost/usd");
  panel.refreshNow();
  LiveChart* acc = panel.chartFor("test/accuracy");
  ASSERT_NE(acc, nullptr);
  EXPECT_EQ(keys(acc->rawGraph("test/accuracy")), (std::vector<double>{0.02, 0.04}));
  EXPECT_EQ(values(acc->rawGraph("test/accuracy")), (std::vector<double>{0.5, 0.75}));
  EXPECT_EQ(acc->xAxis->label(), "cost/usd (USD)");  // the metric and its unit
  // Samples that come later are paired as they arrive (x of step 5 arrives with y of step 6).
  TailBatch more;
  more.runId = "r1";
  more.series = {{"test/accuracy", {{6, 0, 0.875}}}, {"cost/usd", {{5, 0, 0.05}, {6, 0, 0.06}}}};
  panel.applyBatch(more);
  panel.refreshNow();
  EXPECT_EQ(keys(acc->rawGraph("test/accuracy")), (std::vector<double>{0.02, 0.04, 0.06}));
  EXPECT_EQ(keys(panel.chartFor("train/loss")->rawGraph("train/loss")), (std::vector<double>{0.01, 0.02, 0.03, 0.04}));
  // Back to steps.
  panel.setXMode(XMapping::Mode::step);
  panel.refreshNow();
  EXPECT_EQ(keys(acc->rawGraph("test/accuracy")), (std::vector<double>{2, 4, 6}));
  // The toolbar's log y reaches every chart.
  panel.setLogAxes(false, true);
  for (LiveChart* c : panel.charts())
    EXPECT_EQ(c->yAxis->scaleType(), QCPAxis::stLogarithmic) << c->objectName().toStdString();
}

TEST(GuiChartOptions, ContextMenuOffersTheOptionsAndExports) {
  LiveChart chart("Loss", {"train/loss"});
  QMenu* menu = chart.buildContextMenu();
  std::set<QString> names;
  for (QAction* a : menu->actions())
    names.insert(a->objectName());
  for (const char* n : {"logX", "logY", "autoY", "fixedY", "exportPng", "exportSvg"})
    EXPECT_TRUE(names.count(n)) << n;
  for (QAction* a : menu->actions())
    if (a->objectName() == "logX")
      a->setChecked(true);  // what a click does
  EXPECT_TRUE(chart.plotOptions().logX);
  EXPECT_EQ(chart.xAxis->scaleType(), QCPAxis::stLogarithmic);
  delete menu;
}

TEST(GuiChartOptions, PngAndSvgExportWhatTheChartShows) {
  test::GuiTempDir dir;
  LiveChart chart("Loss", {"train/loss", "test/loss"});
  chart.resize(420, 280);
  std::vector<Point> train, test;
  for (int i = 1; i <= 200; ++i) {
    train.push_back({i, 10.0 * i, 2.0 / i});
    if (i % 20 == 0)
      test.push_back({i, 10.0 * i, 2.5 / i});
  }
  chart.append("train/loss", train);
  chart.append("test/loss", test);
  chart.refresh();
  chart.replot();

  const QString png = QString::fromStdString(dir.file("chart.png"));
  exportPng(&chart, png);
  QImage image(png);
  ASSERT_FALSE(image.isNull());
  EXPECT_EQ(image.size(), QSize(420, 280));
  const QRgb background = image.pixel(0, 0);
  int other = 0;
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x)
      other += image.pixel(x, y) != background;
  EXPECT_GT(other, 2000) << "an empty picture";
  // The curve's colour is in the picture.
  const QColor curve = chart.rawGraph("train/loss")->pen().color();
  bool found = false;
  for (int y = 0; y < image.height() && !found; ++y)
    for (int x = 0; x < image.width() && !found; ++x) {
      const QColor c(image.pixel(x, y));
      found =
          std::abs(c.red() - curve.red()) + std::abs(c.green() - curve.green()) + std::abs(c.blue() - curve.blue()) <
              40 &&
          c != QColor(background);
    }
  EXPECT_TRUE(found);

  const QString svgPath = QString::fromStdString(dir.file("chart.svg"));
  exportSvg(&chart, svgPath);
  QFile file(svgPath);
  ASSERT_TRUE(file.open(QIODevice::ReadOnly));
  QXmlStreamReader xml(&file);
  std::set<QString> strokes;
  int lines = 0;
  bool root = false;
  QString viewBox;
  while (!xml.atEnd()) {
    if (xml.readNext() != QXmlStreamReader::StartElement)
      continue;
    if (xml.name() == QLatin1String("svg")) {
      root = true;
      viewBox = xml.attributes().value("viewBox").toString();
    }
    if (xml.attributes().hasAttribute("stroke"))
      strokes.insert(xml.attributes().value("stroke").toString().toLower());
    if (xml.name() == QLatin1String("polyline") || xml.name() == QLatin1String("path"))
      ++lines;
  }
  ASSERT_FALSE(xml.hasError()) << xml.errorString().toStdString();
  EXPECT_TRUE(root);
  EXPECT_EQ(viewBox, "0 0 420 280");  // the widget's size in pixels (width / height are in mm)
  EXPECT_GE(lines, 2);
  for (const char* metric : {"train/loss", "test/loss"}) {
    const QString colour = chart.rawGraph(metric)->pen().color().name().toLower();
    EXPECT_TRUE(strokes.count(colour)) << metric << " " << colour.toStdString();
  }
  EXPECT_THROW(exportSvg(&chart, "/nonexistent-dir/x.svg"), std::runtime_error);
  EXPECT_THROW(exportPng(&chart, "/nonexistent-dir/x.png"), std::runtime_error);
}

TEST(GuiChartOptions, CompareCurvesByAnotherMetricOnLogAxes) {
  test::GuiTempDir dir;
  const nlohmann::json cfg = {{"name", "c"}, {"seed", 0}};
  const std::string a =
      test::write_run(dir.db(), "a", cfg, {{"cost/usd", {0.1, 0.2, 0.3}}, {"train/loss", {1.0, 0.0, 0.5}}});
  const std::string b =
      test::write_run(dir.db(), "b", cfg, {{"cost/usd", {0.4, 0.8, 1.2}}, {"train/loss", {2.0, 1.5, 1.25}}});
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns({QString::fromStdString(a), QString::fromStdString(b)});
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();
  view.setCurveMetric("train/loss");
  view.setCurveX("cost/usd");
  QCustomPlot* plot = view.curvePlot();
  ASSERT_EQ(plot->graphCount(), 2);
  EXPECT_EQ(keys(plot->graph(0)), (std::vector<double>{0.1, 0.2, 0.3}));
  EXPECT_EQ(keys(plot->graph(1)), (std::vector<double>{0.4, 0.8, 1.2}));
  EXPECT_EQ(values(plot->graph(1)), (std::vector<double>{2.0, 1.5, 1.25}));
  EXPECT_EQ(plot->xAxis->label(), "cost/usd (USD)");
  EXPECT_EQ(plot->yAxis->label(), "train/loss");  // a loss has no unit
  PlotOptions o;
  o.logX = o.logY = true;
  view.setCurveOptions(o);
  EXPECT_EQ(plot->yAxis->scaleType(), QCPAxis::stLogarithmic);
  EXPECT_EQ(plot->xAxis->scaleType(), QCPAxis::stLogarithmic);
  EXPECT_EQ(view.curveHiddenPoints(), 1);  // run a's loss of 0
  EXPECT_EQ(values(plot->graph(0)), (std::vector<double>{1.0, 0.5}));
  plot->replot();
  o.fixedY = true;
  o.yMin = 0.1;
  o.yMax = 10;
  view.setCurveOptions(o);
  EXPECT_DOUBLE_EQ(plot->yAxis->range().lower, 0.1);
  EXPECT_DOUBLE_EQ(plot->yAxis->range().upper, 10);
  view.setScatterAxes("cost/usd", "train/loss");
  view.setScatterOptions(o);
  EXPECT_EQ(view.scatterPlot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
  QMenu* menu = view.buildPlotMenu(view.scatterPlot());
  std::set<QString> names;
  for (QAction* act : menu->actions())
    names.insert(act->objectName());
  EXPECT_TRUE(names.count("exportSvg") && names.count("logY"));
  delete menu;
}

}  // namespace lathe::ui
