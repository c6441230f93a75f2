// Chart legends show every run label whole: short labels sit three to a row, long ones (a sweep
// run's name with its id) take a row each, and the chart grows to hold the rows instead of cutting
// "mlp-fashion (2…" at its edge.
#include <QFile>
#include <QFont>
#include <QFontMetrics>

#include <algorithm>

#include "report_test_util.h"
#include "widgets/report/report_charts.h"
#include "widgets/report/report_data.h"
#include "widgets/report/report_html.h"

namespace lathe::report {
namespace {

TEST(ReportLegend, LongLabelsWrapToRowsInsteadOfBeingCut) {
  test::ensure_qapp();
  EXPECT_EQ(legend_columns({"a", "b", "c"}, 530), 3);
  const std::vector<std::string> long_labels = {"mlp-fashion lr=0.02 ratio=0.5 (20261203-145250-26cbee)",
                                                "mlp-fashion lr=0.05 ratio=0.5 (20261203-145301-7a2c01)"};
  EXPECT_EQ(legend_columns(long_labels, 335), 1);
  EXPECT_LE(legend_columns(long_labels, 530), 2);
  // Each entry fits: the widest label and its icon are narrower than width / columns.
  const QFontMetrics metrics(QFont("DejaVu Sans", 8));
  for (int width : {200, 335, 530}) {
    const int columns = legend_columns(long_labels, width);
    for (const QString& line : QString::fromStdString(wrap_legend_label(long_labels[0], width)).split('\n'))
      EXPECT_LT(metrics.horizontalAdvance(line) + 16, width / columns) << width << " " << line.toStdString();
  }
  // Wrapped at spaces, every word kept.
  const std::string wrapped = wrap_legend_label(long_labels[0], 200);
  EXPECT_NE(wrapped.find('\n'), std::string::npos);
  std::string joined = wrapped;
  std::replace(joined.begin(), joined.end(), '\n', ' ');
  EXPECT_EQ(joined, long_labels[0]);
  // A chart with such a legend renders (a PNG for the test to look at with LATHE_KEEP_CHART).
  const std::vector<Point> pts = {{1, 1, 1.0}, {2, 2, 0.5}};
  ChartSpec spec;
  spec.title = "train/loss";
  spec.legend = true;
  spec.lines = {{long_labels[0], run_color(0), &pts}, {long_labels[1], run_color(1), &pts}};
  EXPECT_EQ(legend_columns(long_labels, 200), 1);
  const int lines = legend_lines(long_labels, 200);
  EXPECT_GE(lines, 4);  // each label on two or more lines
  const QByteArray png = render_chart_png(spec, 200, 200 + 16 * lines, 2.0);
  EXPECT_GT(png.size(), 1000);
  if (qEnvironmentVariableIsSet("LATHE_KEEP_CHART")) {
    QFile f(qEnvironmentVariable("LATHE_KEEP_CHART"));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(png);
  }
}

TEST(ReportLegend, ComparisonChartsGrowForTheLegendRows) {
  test::ensure_qapp();
  test::TempDir dir;
  const std::string db = dir.file("lathe.db");
  std::vector<std::string> ids;
  for (const char* name :
       {"mlp-fashion lr=0.02 ratio=0.5 calibration=entropy", "mlp-fashion lr=0.05 ratio=0.5 calibration=entropy",
        "mlp-fashion lr=0.10 ratio=0.5 calibration=entropy"}) {
    RunWriter w(db);
    RunInfo info;
    info.name = name;
    info.config = {{"name", name}};
    ids.push_back(w.begin_run(info));
    for (int64_t s = 1; s <= 5; ++s)
      w.sample("train/loss", s, s, 1.0 / s);
    w.finish(RunStatus::finished);
  }
  Store store = Store::open(db);
  const ReportData data = collect_report_data(store, ids);
  const std::vector<ChartImage> charts = render_report_charts(data, HtmlFlavor::standalone);
  ASSERT_EQ(charts.size(), 1u);
  // One label a row: three legend rows below the 290-pixel plot.
  std::vector<std::string> labels;
  for (const ReportRun& r : data.runs)
    labels.push_back(r.label);
  EXPECT_EQ(legend_columns(labels, charts[0].width), 1);
  EXPECT_EQ(legend_lines(labels, charts[0].width), 3);
  EXPECT_EQ(charts[0].height, 290 + 3 * 16);
}

}  // namespace
}  // namespace lathe::report
