// Brushing parallel coordinates selects runs beyond the run table's page (issue 17 item 3): with
// 250 runs (three pages of 100) the brushed runs are the selection on every page, Compare and
// Export get all of them, paging keeps them, a click in the table replaces them, clearing the
// brush empties the selection.
#include <gtest/gtest.h>

#include <QItemSelectionModel>
#include <QPushButton>
#include <QSet>

#include "gui_test_util.h"
#include "widgets/ui/run_browser.h"

namespace lathe::ui {
namespace {

/// The brushed runs on the table's current page, and how many rows the table shows selected.
std::pair<int, int> page_counts(RunBrowser& browser, const QSet<QString>& expected) {
  int onPage = 0;
  for (int r = 0; r < browser.model()->rowCount(); ++r)
    onPage += expected.contains(browser.model()->runId(r));
  return {onPage, static_cast<int>(browser.table()->selectionModel()->selectedRows().size())};
}

TEST(GuiBrushPages, BrushedRunsAreTheSelectionOnEveryPage) {
  test::GuiTempDir dir;
  constexpr int kRuns = 250;
  std::vector<std::string> ids;
  QSet<QString> wide, narrow;  // accuracy >= 0.4 (150 runs), >= 0.9 (25 runs)
  for (int i = 0; i < kRuns; ++i) {
    const int k = (i * 37) % kRuns;  // accuracies k/250 spread over the pages
    ids.push_back(test::write_run(dir.db(), "r" + std::to_string(i), {{"seed", i}},
                                  {{"test/accuracy", {k / static_cast<double>(kRuns)}}}));
    if (k >= 100)
      wide.insert(QString::fromStdString(ids.back()));
    if (k >= 225)
      narrow.insert(QString::fromStdString(ids.back()));
  }
  ASSERT_EQ(wide.size(), 150);
  ASSERT_EQ(narrow.size(), 25);
  RunBrowser browser(dir.qdb());
  ASSERT_TRUE(test::wait_until([&]() { return !browser.model()->loading() && browser.model()->total() == kRuns; },
                               20000));
  ASSERT_EQ(browser.model()->rowCount(), 100);
  ParallelCoordsPanel* panel = browser.parallelPanel();
  ASSERT_EQ(test::open_parallel(browser), "");
  ASSERT_EQ(panel->model().runCount(), static_cast<size_t>(kRuns));
  panel->setAxes({"seed", "last test/accuracy"});

  // Accuracy spans 0 .. 249/250: the brush from 0.399 of the axis up keeps k >= 100.
  panel->plot()->brushAxis(1, 0.399, 1.0);
  QStringList selected = browser.selectedRunIds();
  EXPECT_EQ(selected.size(), 150);
  EXPECT_EQ(QSet<QString>(selected.begin(), selected.end()), wide);
  std::pair<int, int> counts = page_counts(browser, wide);
  EXPECT_GT(counts.first, 0);
  EXPECT_LT(counts.first, 100);
  EXPECT_EQ(counts.second, counts.first);  // this page's brushed rows are selected, no others
  EXPECT_FALSE(browser.selectionLabel()->isHidden());
  EXPECT_EQ(browser.selectionLabel()->text(),
            QString("150 brushed runs selected (%1 on this page)").arg(counts.first));

  // Export gets every brushed run, not the page's.
  std::vector<QStringList> exported, compared;
  QObject::connect(&browser, &RunBrowser::exportRuns, [&](const QStringList& ids) { exported.push_back(ids); });
  QObject::connect(&browser, &RunBrowser::compareRuns, [&](const QStringList& ids) { compared.push_back(ids); });
  auto* exportButton = browser.findChild<QPushButton*>("exportButton");
  auto* compareButton = browser.findChild<QPushButton*>("compareButton");
  ASSERT_TRUE(exportButton && compareButton);
  EXPECT_TRUE(exportButton->isEnabled());
  exportButton->click();
  ASSERT_EQ(exported.size(), 1u);
  EXPECT_EQ(exported[0].size(), 150);
  EXPECT_FALSE(compareButton->isEnabled());  // more than kMaxCompareRuns

  // The next page shows its own brushed rows selected; the selection is still all 150.
  browser.model()->setPage(100);
  ASSERT_TRUE(test::wait_until([&]() { return !browser.model()->loading() && browser.model()->offset() == 100; },
                               20000));
  test::wait_until([]() { return false; }, 50);
  counts = page_counts(browser, wide);
  EXPECT_GT(counts.first, 0);
  EXPECT_EQ(counts.second, counts.first);
  EXPECT_EQ(browser.selectedRunIds().size(), 150);

  // A narrower brush: Compare takes all 25, wherever they are.
  panel->plot()->brushAxis(1, 0.9, 1.0);
  selected = browser.selectedRunIds();
  EXPECT_EQ(QSet<QString>(selected.begin(), selected.end()), narrow);
  ASSERT_TRUE(compareButton->isEnabled());
  compareButton->click();
  ASSERT_EQ(compared.size(), 1u);
  EXPECT_EQ(compared[0].size(), 25);

  // A click in the table replaces the brushed selection with the clicked row.
  browser.table()->selectionModel()->select(browser.model()->index(0, 0),
                                            QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  EXPECT_EQ(browser.selectedRunIds(), QStringList{browser.model()->runId(0)});
  EXPECT_TRUE(browser.selectionLabel()->isHidden());

  // Brushing again, then clearing the brushes: nothing selected.
  panel->plot()->brushAxis(1, 0.399, 1.0);
  EXPECT_EQ(browser.selectedRunIds().size(), 150);
  panel->clearBrushes();
  EXPECT_TRUE(browser.selectedRunIds().isEmpty());
  EXPECT_TRUE(browser.table()->selectionModel()->selectedRows().isEmpty());
  EXPECT_TRUE(browser.selectionLabel()->isHidden());
}

}  // namespace
}  // namespace lathe::ui
