// Live "Add chart": any metric the run logged can get its own chart (with the points seen so far),
// the menu offers only metrics no chart shows, and the choice is remembered per preset: the next
// run of the same preset (a sweep run included) gets the chart back, another preset does not.
#include <gtest/gtest.h>

#include <QMenu>
#include <QSettings>
#include <QStandardPaths>
#include <QToolButton>

#include "gui_test_util.h"
#include "widgets/ui/chart_panel.h"

namespace lathe::ui {
namespace {

TailBatch first_batch(const std::string& id, const std::string& name) {
  TailBatch b;
  b.runId = QString::fromStdString(id);
  b.reset = true;
  RunRecord r;
  r.id = id;
  r.name = name;
  r.status = RunStatus::running;
  b.run = r;
  b.series = {{"train/loss", {Point{1, 10, 2.0}, Point{2, 20, 1.5}}},
              {"prune/sparsity/fc1", {Point{2, 20, 0.25}, Point{3, 30, 0.5}}},
              {"train/loss_scale", {Point{1, 10, 65536}}}};
  return b;
}

QAction* menu_action(ChartPanel& panel, const QString& text) {
  auto* button = panel.findChild<QToolButton*>("addChart");
  if (!button || !button->menu())
    return nullptr;
  emit button->menu()->aboutToShow();  // the menu is filled when it opens
  for (QAction* a : button->menu()->actions())
    if (a->text() == text)
      return a;
  return nullptr;
}

}  // namespace

TEST(GuiLiveAddChart, AnyMetricRememberedPerPreset) {
  test::GuiTempDir dir;
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, QString::fromStdString(dir.file("settings")));
  EXPECT_EQ(ChartPanel::presetOf("mlp-fashion lr=0.02 ratio=0.5"), "mlp-fashion");
  EXPECT_EQ(ChartPanel::presetOf("mlp-fashion (re-run of 1a2b3c4d)"), "mlp-fashion");
  {
    ChartPanel panel;
    panel.applyBatch(first_batch("r1", "mlp-fashion lr=0.02"));
    EXPECT_EQ(panel.preset(), "mlp-fashion");
    EXPECT_EQ(panel.addableMetrics(), (QStringList{"prune/sparsity/fc1", "train/loss_scale"}));  // not train/loss
    QAction* add = menu_action(panel, "prune/sparsity/fc1");
    ASSERT_NE(add, nullptr);
    add->trigger();
    ASSERT_EQ(panel.charts().size(), 7u);
    LiveChart* chart = panel.chartFor("prune/sparsity/fc1");
    ASSERT_NE(chart, nullptr);
    EXPECT_EQ(chart->pointCount("prune/sparsity/fc1"), 2);  // the points logged before it was added
    TailBatch more;
    more.runId = "r1";
    more.series = {{"prune/sparsity/fc1", {Point{4, 40, 0.75}}}};
    panel.applyBatch(more);
    EXPECT_EQ(chart->pointCount("prune/sparsity/fc1"), 3);
    EXPECT_EQ(panel.addableMetrics(), (QStringList{"train/loss_scale"}));
  }
  // A new window, the preset's next run (another sweep value): the chart comes back, with data.
  ChartPanel again;
  again.applyBatch(first_batch("r2", "mlp-fashion lr=0.05"));
  EXPECT_EQ(again.addedMetrics(), (QStringList{"prune/sparsity/fc1"}));
  ASSERT_NE(again.chartFor("prune/sparsity/fc1"), nullptr);
  EXPECT_EQ(again.chartFor("prune/sparsity/fc1")->pointCount("prune/sparsity/fc1"), 2);
  // Another preset has its own choice (none yet); back on the first, removing forgets it.
  again.applyBatch(first_batch("r3", "cnn-fashion"));
  EXPECT_TRUE(again.addedMetrics().isEmpty());
  EXPECT_EQ(again.charts().size(), 6u);
  again.applyBatch(first_batch("r4", "mlp-fashion"));
  EXPECT_EQ(again.addedMetrics(), (QStringList{"prune/sparsity/fc1"}));
  EXPECT_TRUE(again.removeChart("prune/sparsity/fc1"));
  EXPECT_FALSE(again.removeChart("train/loss"));  // a built-in chart stays
  ChartPanel third;
  third.applyBatch(first_batch("r5", "mlp-fashion"));
  EXPECT_TRUE(third.addedMetrics().isEmpty());
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope,
                     QStandardPaths::writableLocation(QStandardPaths::GenericConfigLocation));
}

}  // namespace lathe::ui
