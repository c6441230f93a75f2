// The compare view's Groups tab on a 3-seed x 4-ratio study: 4 groups, each row's test/accuracy
// cell the mean ± sample std (n=3) computed here by hand from the stored series; the chart's band
// is mean ± std or the min/max envelope by the switch, members drawn on demand; the scatter puts
// each group at its means with std error bars; "Group by" regroups
// (by seed: 3 groups) and a malformed text is shown, not thrown.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "engine/store/store.h"
#include "gui_test_util.h"
#include "tests/analysis/analysis_test_util.h"
#include "widgets/ui/compare_view.h"

namespace lathe::ui {
namespace {

struct HandSpread {
  double mean = 0, std = 0, min = 0, max = 0;
};
HandSpread by_hand(const std::vector<double>& v) {
  HandSpread h;
  h.min = h.max = v[0];
  for (double x : v) {
    h.mean += x;
    h.min = std::min(h.min, x);
    h.max = std::max(h.max, x);
  }
  h.mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v)
    ss += (x - h.mean) * (x - h.mean);
  h.std = std::sqrt(ss / static_cast<double>(v.size() - 1));
  return h;
}

TEST(GuiGroups, StudyFoldsIntoFourGroupsWithMeanAndStd) {
  test::GuiTempDir dir;
  const std::vector<std::string> ids = test::write_study(dir.db());
  QStringList qids;
  for (const std::string& id : ids)
    qids << QString::fromStdString(id);
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns(qids);
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();
  view.showPage("groups");
  GroupPanel* panel = view.groupPanel();
  ASSERT_EQ(panel->groups().size(), 4u);
  EXPECT_TRUE(panel->note()->text().contains("ddof=1")) << panel->note()->text().toStdString();
  QTableWidget* t = panel->table();
  ASSERT_EQ(t->rowCount(), 4);
  int acc_col = -1;
  for (int c = 0; c < t->columnCount(); ++c)
    if (t->horizontalHeaderItem(c)->text() == "test/accuracy (last)")
      acc_col = c;
  ASSERT_GE(acc_col, 0);
  Store store = Store::open(dir.db(), Store::read_only_options());
  for (int g = 0; g < 4; ++g) {
    std::vector<double> last;
    for (int k = 0; k < 3; ++k)
      last.push_back(store.series(ids[3 * g + k], "test/accuracy").back().value);
    const HandSpread h = by_hand(last);
    char want[96];
    std::snprintf(want, sizeof(want), "%.4g \u00b1 %.2g (n=3)", h.mean, h.std);
    EXPECT_EQ(t->item(g, acc_col)->text().toStdString(), want) << "group " << g;
    EXPECT_EQ(t->item(g, 1)->text(), "3");
  }
  // The chart: per group a lower and an upper band graph and the mean line.
  panel->setMetric("test/accuracy");
  panel->setBand(GroupPanel::Band::stdBand);
  QCustomPlot* plot = panel->plot();
  ASSERT_EQ(plot->graphCount(), 12);
  // Group 0 at step 5: the band is mean ± std of the three members' values there.
  std::vector<double> at5;
  for (int k = 0; k < 3; ++k)
    at5.push_back(store.series(ids[k], "test/accuracy").back().value);
  const HandSpread h5 = by_hand(at5);
  auto value_at = [&](int graph, double step) {
    auto it = plot->graph(graph)->data()->findBegin(step, false);
    return it->value;
  };
  EXPECT_NEAR(value_at(0, 5), h5.mean - h5.std, 1e-12);
  EXPECT_NEAR(value_at(1, 5), h5.mean + h5.std, 1e-12);
  EXPECT_NEAR(value_at(2, 5), h5.mean, 1e-12);
  panel->setBand(GroupPanel::Band::envelope);
  EXPECT_EQ(value_at(0, 5), h5.min);
  EXPECT_EQ(value_at(1, 5), h5.max);
  panel->setShowMembers(true);
  EXPECT_EQ(plot->graphCount(), 24);  // + three member traces per group
  // Scatter of the groups: one point per group at the means, error bars of one sample std.
  panel->setScatterAxes("model/bytes", "test/accuracy");
  ASSERT_EQ(plot->graphCount(), 4);
  EXPECT_EQ(plot->plottableCount(), 4 + 8);  // + an x and a y error bar per group
  {
    std::vector<double> bytes, acc;
    for (int k = 0; k < 3; ++k) {
      bytes.push_back(store.series(ids[k], "model/bytes").back().value);
      acc.push_back(store.series(ids[k], "test/accuracy").back().value);
    }
    const HandSpread hb = by_hand(bytes), ha = by_hand(acc);
    auto it = plot->graph(0)->data()->begin();
    EXPECT_NEAR(it->key, hb.mean, 1e-9 * hb.mean);
    EXPECT_NEAR(it->value, ha.mean, 1e-12);
    auto* ybars = qobject_cast<QCPErrorBars*>(plot->plottable(2));  // graph 0, its x bars, its y bars, graph 1 ...
    ASSERT_TRUE(ybars);
    EXPECT_EQ(ybars->errorType(), QCPErrorBars::etValueError);
    EXPECT_NEAR(ybars->data()->at(0).errorPlus, ha.std, 1e-12);
  }
  panel->setView(GroupPanel::View::curves);
  EXPECT_EQ(plot->plottableCount(), plot->graphCount());  // no error bars left behind
  // Group by the seed instead: 3 groups of 4 ratios.
  panel->setGroupBy("seed");
  EXPECT_EQ(panel->groups().size(), 3u);
  EXPECT_EQ(panel->table()->rowCount(), 3);
  panel->setGroupBy("prune.ratio,-seed");
  EXPECT_TRUE(panel->groups().empty());
  EXPECT_TRUE(panel->note()->text().contains("mixes keys")) << panel->note()->text().toStdString();
}

}  // namespace
}  // namespace lathe::ui
