// Notes and tags in the run browser: tags and note edited through the browser land in the store
// and show in the Tags / Note columns and every cell's tooltip; the search box finds runs by note
// text and keeps only tagged runs with tag:NAME; a bad tag comes back as the store's message.
#include <gtest/gtest.h>

#include "engine/store/store.h"
#include "gui_test_util.h"
#include "widgets/ui/run_browser.h"

namespace lathe::ui {

namespace {
int column_of(RunTableModel* m, const QString& header) {
  for (int c = 0; c < m->columnCount(); ++c)
    if (m->headerData(c, Qt::Horizontal, Qt::DisplayRole).toString() == header)
      return c;
  return -1;
}
}  // namespace

TEST(GuiRunNotes, EditShowSearchAndFilter) {
  test::GuiTempDir dir;
  const QString a = QString::fromStdString(test::write_run(dir.db(), "alpha", {{"seed", 0}}, {{"m", {1.0}}}));
  const QString b = QString::fromStdString(test::write_run(dir.db(), "beta", {{"seed", 1}}, {{"m", {2.0}}}));
  RunBrowser browser(dir.qdb());
  RunTableModel* model = browser.model();
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 2 && !model->loading(); }, 10000));
  EXPECT_TRUE(browser.editTags({a, b}, {"paper"}, {}).isEmpty());
  EXPECT_TRUE(browser.editTags({a}, {"baseline"}, {}).isEmpty());
  EXPECT_TRUE(browser.setNote(a, "dense reference\nsecond line").isEmpty());
  const QString bad = browser.editTags({b}, {"two words"}, {});
  EXPECT_TRUE(bad.contains("tag 'two words'") && bad.contains("allowed")) << bad.toStdString();
  Store store = Store::open(dir.db());
  EXPECT_EQ(store.run(a.toStdString()).tags, (std::vector<std::string>{"baseline", "paper"}));
  EXPECT_EQ(store.run(b.toStdString()).tags, (std::vector<std::string>{"paper"}));

  const int tags = column_of(model, "Tags"), note = column_of(model, "Note");
  ASSERT_GE(tags, 0);
  ASSERT_GE(note, 0);
  // The reloads the edits asked for come in asynchronously: wait for the page that has them.
  const auto row_of = [&](const QString& id) { return model->runId(0) == id ? 0 : 1; };
  ASSERT_TRUE(test::wait_until(
      [&]() {
        return model->rowCount() == 2 &&
               model->data(model->index(row_of(a), note), Qt::DisplayRole).toString() == "dense reference";
      },
      10000));
  const int row_a = row_of(a);
  EXPECT_EQ(model->data(model->index(row_a, tags), Qt::DisplayRole).toString(), "baseline, paper");
  EXPECT_EQ(model->data(model->index(row_a, note), Qt::DisplayRole).toString(), "dense reference");
  const QString tip = model->data(model->index(row_a, 0), Qt::ToolTipRole).toString();
  EXPECT_TRUE(tip.contains("Tags: baseline, paper") && tip.contains("second line")) << tip.toStdString();

  browser.searchBox()->setText("REFERENCE");
  emit browser.searchBox()->editingFinished();
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 1 && model->rowCount() == 1; }, 10000));
  EXPECT_EQ(model->runId(0), a);
  browser.searchBox()->setText("tag:paper");
  emit browser.searchBox()->editingFinished();
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 2 && model->rowCount() == 2; }, 10000));
  browser.searchBox()->setText("tag:baseline");
  emit browser.searchBox()->editingFinished();
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 1 && model->rowCount() == 1; }, 10000));
  EXPECT_EQ(model->runId(0), a);
}

}  // namespace lathe::ui
