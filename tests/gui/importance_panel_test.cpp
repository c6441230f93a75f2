// The compare view's "What matters" tab on a 5-ratio x 3-seed study whose accuracy follows the
// ratio: prune.ratio is the top bar and the table's first row with a strongly negative rho; a
// metric too few runs have is explained in the note, not thrown.
#include <gtest/gtest.h>

#include "gui_test_util.h"
#include "tests/analysis/analysis_test_util.h"
#include "widgets/ui/compare_view.h"

namespace lathe::ui {

TEST(GuiImportance, RatioComesFirst) {
  test::GuiTempDir dir;
  const std::vector<std::string> ids = test::write_study(dir.db(), {0.1, 0.3, 0.5, 0.7, 0.9}, 3);
  QStringList qids;
  for (const std::string& id : ids)
    qids << QString::fromStdString(id);
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns(qids);
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();
  view.showPage("what matters");
  ImportancePanel* p = view.importancePanel();
  p->setMetric("test/accuracy");
  ASSERT_EQ(p->result().knobs.size(), 2u) << p->note()->text().toStdString();
  EXPECT_EQ(p->result().knobs[0].knob, "prune.ratio");
  EXPECT_EQ(p->table()->item(0, 0)->text(), "prune.ratio");
  EXPECT_LT(p->table()->item(0, 3)->text().toDouble(), -0.8);
  EXPECT_EQ(p->plot()->plottableCount(), 1);
  EXPECT_TRUE(p->note()->text().contains("random forest")) << p->note()->text().toStdString();
}

}  // namespace lathe::ui
