// The run browser pages, filters and sorts through the store (a store of 250 runs).
#include <gtest/gtest.h>

#include "engine/store/store.h"
#include "gui_test_util.h"
#include "widgets/ui/run_browser.h"

namespace lathe::ui {

TEST(GuiRunBrowser, PagesFiltersSortsAndDeletes) {
  test::GuiTempDir dir;
  {
    Store store = Store::open(dir.db());
    for (int i = 0; i < 250; ++i) {
      RunInfo info;
      info.name = (i % 5 == 0 ? "cnn-" : "mlp-") + std::to_string(i);
      info.config = {{"model", {{"zoo", i % 5 == 0 ? "cnn" : "mlp"}}}};
      store.create_run(info, RunStatus::finished);
    }
  }
  const std::string acc_best = test::write_run(dir.db(), "mlp-best", {{"model", {{"zoo", "mlp"}}}},
                                               {{"test/accuracy", {0.1, 0.99, 0.5}}});
  RunBrowser browser(dir.qdb());
  RunTableModel* model = browser.model();
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 251 && !model->loading(); }, 10000));
  EXPECT_EQ(model->rowCount(), 100);
  model->setPage(200);
  ASSERT_TRUE(test::wait_until([&]() { return model->rowCount() == 51 && !model->loading(); }, 10000));

  model->query().name_glob = "cnn-*";
  model->setPage(0);
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 50 && !model->loading(); }, 10000));
  for (int r = 0; r < model->rowCount(); ++r)
    EXPECT_TRUE(model->data(model->index(r, 0), Qt::DisplayRole).toString().startsWith("cnn-"));
  EXPECT_EQ(model->data(model->index(0, 5), Qt::DisplayRole).toString(), "cnn");  // the model.zoo column

  model->query().name_glob.clear();
  model->query().params = {{"model.zoo", "mlp"}};
  model->sort(8, Qt::DescendingOrder);  // best test accuracy first
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 201 && !model->loading(); }, 10000));
  EXPECT_EQ(model->runId(0).toStdString(), acc_best);
  EXPECT_EQ(model->data(model->index(0, 8), Qt::DisplayRole).toString(), "0.99");
  EXPECT_EQ(model->data(model->index(0, 7), Qt::DisplayRole).toString(), "0.5");

  EXPECT_TRUE(browser.deleteRuns({QString::fromStdString(acc_best)}).isEmpty());
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 200 && !model->loading(); }, 10000));
  EXPECT_FALSE(Store::open(dir.db()).find_run(acc_best).has_value());
}

}  // namespace lathe::ui
