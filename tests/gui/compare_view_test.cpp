// The compare view on three runs written to a store: the config table with "only differences"
// shows exactly the keys that were changed, the metric table the written numbers, the scatter's
// Pareto front the runs worked out by hand.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "engine/store/run_writer.h"
#include "engine/store/store.h"
#include "gui_test_util.h"
#include "widgets/ui/compare_view.h"
#include "widgets/ui/series_math.h"

namespace lathe::ui {
namespace {

nlohmann::json config(int seed, int epochs, double lr) {
  return {{"name", "cmp"},
          {"seed", seed},
          {"model", {{"zoo", "cnn"}}},
          {"train", {{"epochs", epochs}, {"batch_size", 128}, {"optimizer", {{"lr", lr}}}}}};
}

std::set<std::string> column0(QTableWidget* t) {
  std::set<std::string> keys;
  for (int r = 0; r < t->rowCount(); ++r)
    keys.insert(t->item(r, 0)->text().toStdString());
  return keys;
}

}  // namespace

TEST(GuiCompare, DiffMetricsAndParetoFront) {
  test::GuiTempDir dir;
  const std::string a =
      test::write_run(dir.db(), "small", config(0, 1, 0.02), {{"test/accuracy", {0.5, 0.80}}, {"model/bytes", {100}}});
  const std::string b = test::write_run(dir.db(), "big", config(1, 1, 0.02),
                                        {{"test/accuracy", {0.6, 0.95, 0.90}}, {"model/bytes", {200}}});
  const std::string c =
      test::write_run(dir.db(), "worse", config(2, 3, 0.02), {{"test/accuracy", {0.7, 0.85}}, {"model/bytes", {300}}});
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns({QString::fromStdString(a), QString::fromStdString(b), QString::fromStdString(c)});
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();

  // Only differences: seed (0/1/2) and train.epochs (1/1/3); name, zoo, batch size and lr are equal.
  ASSERT_TRUE(view.onlyDifferences()->isChecked());
  EXPECT_EQ(column0(view.configTable()), (std::set<std::string>{"seed", "train.epochs"}));
  EXPECT_EQ(view.configTable()->item(0, 1)->text(), "0");
  EXPECT_EQ(view.configTable()->columnCount(), 4);
  view.onlyDifferences()->setChecked(false);
  const auto all = column0(view.configTable());
  EXPECT_TRUE(all.count("train.batch_size") && all.count("model.zoo") && all.count("seed")) << all.size();

  // Metric table: test/accuracy last / best / min / max of run b = 0.90 / 0.95 / 0.6 / 0.95.
  QTableWidget* m = view.metricTable();
  std::map<std::string, QString> b_values;
  for (int r = 0; r < m->rowCount(); ++r)
    if (m->item(r, 0)->text() == "test/accuracy") {
      EXPECT_EQ(m->item(r, 1)->text(), "fraction");  // each row says its metric's unit
      b_values[m->item(r, 2)->text().toStdString()] = m->item(r, CompareView::kFirstRunColumn + 1)->text();
    }
  EXPECT_EQ(b_values["last"], "0.9");
  EXPECT_EQ(b_values["best"], "0.95");
  EXPECT_EQ(b_values["min"], "0.6");
  EXPECT_EQ(b_values["max"], "0.95");

  // Scatter of last accuracy against bytes (smaller is better): a (100, 0.80) and b (200, 0.90)
  // are on the front; c (300, 0.85) is dominated by b.
  EXPECT_EQ(m->horizontalHeaderItem(1)->text(), "unit");
  for (int r = 0; r < m->rowCount(); ++r)
    if (m->item(r, 0)->text() == "model/bytes")
      EXPECT_EQ(m->item(r, 1)->text(), "bytes");

  view.setScatterAxes("model/bytes", "test/accuracy");
  EXPECT_EQ(view.paretoRuns(), (std::vector<int>{0, 1}));
  EXPECT_EQ(view.curvePlot()->graphCount(), 3);
  // The axes name each metric's unit, and which way is better where lower is.
  EXPECT_EQ(view.scatterPlot()->xAxis->label(), "model/bytes (bytes), lower is better");
  EXPECT_EQ(view.scatterPlot()->yAxis->label(), "test/accuracy (fraction)");
  view.setCurveMetric("test/accuracy");
  EXPECT_EQ(view.curvePlot()->yAxis->label(), "test/accuracy (fraction)");
  EXPECT_EQ(view.curvePlot()->xAxis->label(), "step");
}

/// The item of `run`'s column in the row (metric, stat) of the metric table.
QTableWidgetItem* metric_item(QTableWidget* m, const QString& metric, const QString& stat, int run) {
  for (int r = 0; r < m->rowCount(); ++r)
    if (m->item(r, 0)->text() == metric && m->item(r, 2)->text() == stat)
      return m->item(r, run + CompareView::kFirstRunColumn);
  return nullptr;
}

TEST(GuiCompare, BoldsTheBestRunByTheMetricsDirection) {
  test::GuiTempDir dir;
  // b has the smallest bytes, latency and cost, c the highest accuracy and throughput.
  const auto run = [&](const char* name, double bytes, double ms, double usd, double acc, double rate) {
    return test::write_run(dir.db(), name, config(0, 1, 0.02),
                           {{"model/bytes", {bytes}},
                            {"latency/dense/b1_ms", {ms}},
                            {"cost/usd", {usd}},
                            {"test/accuracy", {acc}},
                            {"throughput/dense/b1_samples_per_s", {rate}}});
  };
  const std::string a = run("a", 300, 2.5, 0.03, 0.80, 100);
  const std::string b = run("b", 100, 0.5, 0.01, 0.85, 200);
  const std::string c = run("c", 200, 1.5, 0.02, 0.90, 300);
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns({QString::fromStdString(a), QString::fromStdString(b), QString::fromStdString(c)});
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();
  const std::vector<std::pair<QString, int>> winners = {{"model/bytes", 1},
                                                        {"latency/dense/b1_ms", 1},
                                                        {"cost/usd", 1},
                                                        {"test/accuracy", 2},
                                                        {"throughput/dense/b1_samples_per_s", 2}};
  for (const auto& [metric, winner] : winners)
    for (const QString stat : {"last", "best"})
      for (int i = 0; i < 3; ++i) {
        QTableWidgetItem* item = metric_item(view.metricTable(), metric, stat, i);
        ASSERT_NE(item, nullptr) << metric.toStdString();
        EXPECT_EQ(item->font().bold(), i == winner)
            << metric.toStdString() << " " << stat.toStdString() << " run " << i;
      }
  // $ per run (the final cost/usd) and $ per accuracy point (cost / (accuracy x 100)): lowest is best.
  const double per_point[] = {0.03 / 80, 0.01 / 85, 0.02 / 90};
  for (int i = 0; i < 3; ++i) {
    QTableWidgetItem* run_usd = metric_item(view.metricTable(), "cost/usd_per_run", "last", i);
    QTableWidgetItem* point = metric_item(view.metricTable(), "cost/usd_per_accuracy_point", "last", i);
    ASSERT_NE(run_usd, nullptr);
    ASSERT_NE(point, nullptr);
    EXPECT_EQ(run_usd->text(), QString::fromStdString(plain_number(std::vector<double>{0.03, 0.01, 0.02}[i], 5)));
    EXPECT_EQ(point->text(), QString::fromStdString(plain_number(per_point[i], 5))) << i;
    EXPECT_EQ(point->font().bold(), i == 1) << i;
    EXPECT_EQ(metric_item(view.metricTable(), "cost/usd_per_accuracy_point", "best", i)->font().bold(), i == 1);
  }
  // Pareto defaults follow the same directions: lower latency and cost are better, accuracy higher.
  view.setScatterAxes("latency/dense/b1_ms", "test/accuracy");
  EXPECT_EQ(view.paretoRuns(), (std::vector<int>{1, 2}));
  view.setScatterAxes("cost/usd", "throughput/dense/b1_samples_per_s");
  EXPECT_EQ(view.paretoRuns(), (std::vector<int>{1, 2}));
}

TEST(GuiCompare, DataParallelFiguresSitBesideTheOneRankRun) {
  test::GuiTempDir dir;
  // One rank, then two and four (the data-parallel issue's dist/* metrics): the table has every
  // rank's rate and utilisation, and the least communication is the best.
  const std::string one = test::write_run(dir.db(), "1 rank", config(0, 1, 0.02),
                                          {{"train/samples_per_s", {5800}}, {"test/accuracy", {0.9179}}});
  const std::string two = test::write_run(dir.db(), "2 ranks", config(1, 1, 0.02),
                                          {{"train/samples_per_s", {4400}},
                                           {"test/accuracy", {0.9177}},
                                           {"dist/world_size", {2}},
                                           {"dist/comm_fraction", {0.17}},
                                           {"dist/rank0/samples_per_s", {2200}},
                                           {"dist/rank1/samples_per_s", {2190}},
                                           {"dist/rank1/util", {0.81}}});
  const std::string four = test::write_run(dir.db(), "4 ranks", config(2, 1, 0.02),
                                           {{"train/samples_per_s", {6000}},
                                            {"test/accuracy", {0.9160}},
                                            {"dist/world_size", {4}},
                                            {"dist/comm_fraction", {0.31}},
                                            {"dist/rank1/util", {0.64}}});
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns({QString::fromStdString(one), QString::fromStdString(two), QString::fromStdString(four)});
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();
  QTableWidget* m = view.metricTable();
  for (const QString metric : {"dist/world_size", "dist/comm_fraction", "dist/rank0/samples_per_s",
                               "dist/rank1/samples_per_s", "dist/rank1/util"})
    ASSERT_NE(metric_item(m, metric, "last", 1), nullptr) << metric.toStdString();
  EXPECT_EQ(metric_item(m, "dist/comm_fraction", "last", 1)->text(), "0.17");
  EXPECT_TRUE(metric_item(m, "dist/comm_fraction", "last", 1)->font().bold());  // less communication
  EXPECT_FALSE(metric_item(m, "dist/comm_fraction", "last", 2)->font().bold());
  EXPECT_TRUE(metric_item(m, "dist/rank1/util", "last", 1)->font().bold());      // busier ranks
  EXPECT_TRUE(metric_item(m, "train/samples_per_s", "last", 2)->font().bold());  // all ranks together
  // The one-rank run has no dist/* value: its cell says so rather than showing a number.
  QTableWidgetItem* none = metric_item(m, "dist/comm_fraction", "last", 0);
  EXPECT_TRUE(none == nullptr || none->text().isEmpty() || none->text() == "-" || none->text() == "—")
      << (none ? none->text().toStdString() : "");
}

TEST(GuiCompare, ShortSeriesGetAMarkerOnEveryPoint) {
  test::GuiTempDir dir;
  // test/loss once per epoch: one point, three points; a dense curve of 200 points.
  std::vector<double> dense(200, 0.5);
  const std::string one = test::write_run(dir.db(), "one", config(0, 1, 0.02), {{"test/loss", {0.7}}});
  const std::string few = test::write_run(dir.db(), "few", config(1, 3, 0.02), {{"test/loss", {0.9, 0.7, 0.6}}});
  const std::string many = test::write_run(dir.db(), "many", config(2, 9, 0.02), {{"test/loss", dense}});
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns({QString::fromStdString(one), QString::fromStdString(few), QString::fromStdString(many)});
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();
  view.setCurveMetric("test/loss");
  QCustomPlot* plot = view.curvePlot();
  ASSERT_EQ(plot->graphCount(), 3);
  EXPECT_EQ(plot->graph(0)->dataCount(), 1);
  EXPECT_EQ(plot->graph(0)->scatterStyle().shape(), QCPScatterStyle::ssDisc);
  EXPECT_EQ(plot->graph(1)->dataCount(), 3);
  EXPECT_EQ(plot->graph(1)->scatterStyle().shape(), QCPScatterStyle::ssDisc);  // a few points: marked too
  EXPECT_EQ(plot->graph(1)->scatterStyle().pen().color(), plot->graph(1)->pen().color());
  EXPECT_EQ(plot->graph(2)->scatterStyle().shape(), QCPScatterStyle::ssNone);  // a dense curve: a line
}

TEST(GuiCompare, SpeedupsFromContendedLatenciesAreMarked) {
  test::GuiTempDir dir;
  // Run a's INT8 latency at batch 256 was timed while others used 45% of the CPUs; b's was clean.
  const std::string a = test::write_run(
      dir.db(), "a", config(0, 1, 0.02),
      {{"quant/speedup_b256", {3.0}}, {"latency/int8/b256_others_cpu_share", {0.45}}, {"quant/speedup_b1", {2.0}}});
  const std::string b = test::write_run(
      dir.db(), "b", config(1, 1, 0.02),
      {{"quant/speedup_b256", {2.5}}, {"latency/int8/b256_others_cpu_share", {0.02}}, {"quant/speedup_b1", {1.5}}});
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns({QString::fromStdString(a), QString::fromStdString(b)});
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();
  QTableWidgetItem* contended = metric_item(view.metricTable(), "quant/speedup_b256", "last", 0);
  QTableWidgetItem* clean = metric_item(view.metricTable(), "quant/speedup_b256", "last", 1);
  ASSERT_NE(contended, nullptr);
  ASSERT_NE(clean, nullptr);
  EXPECT_EQ(contended->text(), QString("3 ") + QChar(0x2020));
  EXPECT_TRUE(contended->toolTip().contains("contended")) << contended->toolTip().toStdString();
  EXPECT_EQ(clean->text(), "2.5");
  EXPECT_TRUE(clean->toolTip().isEmpty());
  EXPECT_EQ(metric_item(view.metricTable(), "quant/speedup_b1", "last", 0)->text(), "2");  // b1 was not contended
}

TEST(GuiCompare, TooFewRunsSaysWhatToDo) {
  test::GuiTempDir dir;
  const CompareData d = load_compare_data(dir.qdb(), {"only-one"});
  EXPECT_TRUE(d.error.contains("Pick 2 to 100 runs")) << d.error.toStdString();
  const CompareData unknown = load_compare_data(dir.qdb(), {"nope1", "nope2"});
  EXPECT_FALSE(unknown.error.isEmpty());
}

// Issue 18 item 5: the config table says where each model came from (an ONNX file with its sha256,
// or the zoo) and where it went (its ONNX export with the sha256 the store computed from the bytes:
// hashlib.sha256(b"onnx bytes")), and marks the provenance rows that differ.
TEST(GuiCompare, ProvenanceRowsNameTheSourceFileAndTheExports) {
  test::GuiTempDir dir;
  std::string imported;
  {
    RunWriter w(dir.db());
    RunInfo info;
    info.name = "from-onnx";
    info.config = {{"name", "from-onnx"}, {"model", {{"zoo", "onnx"}, {"onnx", "/data/resnet.onnx"}}}};
    info.backend = "cpu";
    imported = w.begin_run(info);
    w.event("model_source", {{"format", "onnx"}, {"file", "/data/resnet.onnx"}, {"sha256", "feedbeef"}, {"opset", 17}});
    // A second source: the distillation teacher gets its own row, not the model source's.
    w.event("distill", {{"teacher", "zoo:teacher"}, {"teacher_origin", "zoo model trained first in this run"}});
    const std::string exported = dir.db() + ".model.onnx";
    std::ofstream(exported) << "onnx bytes";
    w.event("artifact", {{"kind", "onnx"}, {"path", exported}, {"bytes", 10}});
    w.finish(RunStatus::finished);
  }
  const std::string zoo = test::write_run(dir.db(), "zoo", config(0, 1, 0.02), {{"test/accuracy", {0.5}}});
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns({QString::fromStdString(imported), QString::fromStdString(zoo)});
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();
  ASSERT_TRUE(view.onlyDifferences()->isChecked());
  std::map<std::string, std::pair<QString, QString>> rows;
  QTableWidget* t = view.configTable();
  for (int r = 0; r < t->rowCount(); ++r)
    rows[t->item(r, 0)->text().toStdString()] = {t->item(r, 1)->text(), t->item(r, 2)->text()};
  ASSERT_TRUE(rows.count("provenance.from"));
  EXPECT_EQ(rows["provenance.from"].first, "ONNX model (opset 17): /data/resnet.onnx (sha256 feedbeef)");
  EXPECT_EQ(rows["provenance.from"].second, "zoo model cnn (initialised by the run)");
  ASSERT_TRUE(rows.count("provenance.from.2"));
  EXPECT_EQ(rows["provenance.from.2"].first, "distillation teacher: zoo model trained first in this run: zoo:teacher");
  EXPECT_EQ(rows["provenance.from.2"].second, "(absent)");
  ASSERT_TRUE(rows.count("provenance.to.1"));
  EXPECT_NE(rows["provenance.to.1"].first.indexOf(
                "ONNX f32: " + QString::fromStdString(dir.db()) +
                ".model.onnx (sha256 c1650a9961b22b18b7919016db749eb46e2f14ad9da48dd02aa586fe8a335978)"),
            -1)
      << rows["provenance.to.1"].first.toStdString();
  EXPECT_EQ(rows["provenance.to.1"].second, "(absent)");
}

}  // namespace lathe::ui
