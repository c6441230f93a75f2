// Sweeps a user can tell apart: each run is named by its values ("mlp-fashion lr=0.02"), the run
// table gets a column per sweep knob, and the sweep dialog refuses "0.02, abc" at the field with
// the form allowed (OK disabled) instead of queuing a run that fails.
#include <gtest/gtest.h>

#include <QPushButton>

#include "engine/run/config.h"
#include "engine/store/store.h"
#include "gui_test_util.h"
#include "widgets/ui/run_browser.h"
#include "widgets/ui/sweep_dialog.h"

namespace lathe::ui {

TEST(GuiSweepNames, RunsAreNamedByTheirValues) {
  const nlohmann::json base = {{"name", "mlp-fashion"}, {"model", {{"zoo", "mlp"}}}};
  const std::vector<SweepRun> runs =
      plan_sweep(base, {{"train.optimizer.lr", {"0.02", "0.05"}}, {"prune.ratio", {"0.5", "0.7"}}});
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].name, "mlp-fashion lr=0.02 ratio=0.5");
  EXPECT_EQ(runs[3].name, "mlp-fashion lr=0.05 ratio=0.7");
  EXPECT_EQ(runs[3].config["name"], "mlp-fashion lr=0.05 ratio=0.7");
  EXPECT_EQ(runs[3].config["model"]["zoo"], "mlp");
  EXPECT_EQ(runs[3].sets, (std::vector<std::string>{"train.optimizer.lr=0.05", "prune.ratio=0.7"}));
  // Two knobs with one last part keep their whole paths.
  EXPECT_EQ(sweep_run_name("x", {"prune.ratio=0.5", "distill.ratio=2"}), "x prune.ratio=0.5 distill.ratio=2");
  EXPECT_EQ(sweep_name_knobs("mlp-fashion lr=0.02 ratio=0.5"),
            (std::vector<std::pair<std::string, std::string>>{{"lr", "0.02"}, {"ratio", "0.5"}}));
  EXPECT_TRUE(sweep_name_knobs("a=b plain name").empty());  // the base name itself is no knob
  EXPECT_TRUE(knob_matches("train.optimizer.lr", "lr"));
  EXPECT_FALSE(knob_matches("train.optimizer.lr", "optimizer.lr2"));
  // The names pass the validator (spaces and '=' are fine in a run name).
  EXPECT_NO_THROW(validate_config(runs[0].config));
}

TEST(GuiSweepNames, RunTableShowsTheKnobsAsColumns) {
  test::GuiTempDir dir;
  const nlohmann::json base = {{"name", "mlp-fashion"}, {"train", {{"optimizer", {{"lr", 0.02}}}}}};
  for (const SweepRun& run : plan_sweep(base, {{"train.optimizer.lr", {"0.02", "0.05"}}})) {
    nlohmann::json config = run.config;
    apply_override(config, run.sets[0]);
    test::write_run(dir.db(), run.name, config, {{"test/accuracy", {0.5}}});
  }
  test::write_run(dir.db(), "plain", {{"model", {{"zoo", "cnn"}}}}, {});
  RunBrowser browser(dir.qdb());
  RunTableModel* model = browser.model();
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 3 && !model->loading(); }, 10000));
  ASSERT_EQ(model->knobColumns(), (std::vector<std::string>{"train.optimizer.lr"}));
  EXPECT_EQ(model->headerData(1, Qt::Horizontal, Qt::DisplayRole).toString(), "train.optimizer.lr");
  EXPECT_EQ(model->headerData(2, Qt::Horizontal, Qt::DisplayRole).toString(), "Status");
  std::map<QString, QString> lr;
  for (int r = 0; r < model->rowCount(); ++r)
    lr[model->data(model->index(r, 0), Qt::DisplayRole).toString()] =
        model->data(model->index(r, 1), Qt::DisplayRole).toString();
  EXPECT_EQ(lr["mlp-fashion lr=0.02"], "0.02");
  EXPECT_EQ(lr["mlp-fashion lr=0.05"], "0.05");
  EXPECT_EQ(lr["plain"], "");
  EXPECT_EQ(model->data(model->index(0, 2), Qt::DisplayRole).toString(), "finished");
}

TEST(GuiSweepDialog, RefusesABadValueAtTheField) {
  const nlohmann::json base = validate_config({{"name", "mlp-fashion"}});
  SweepDialog dialog(base);
  dialog.setAxes({{"train.optimizer.lr", {"0.02", "abc"}}});
  EXPECT_FALSE(dialog.acceptable());
  const QString error = dialog.valueError(1);
  EXPECT_TRUE(error.contains("train.optimizer.lr")) << error.toStdString();
  EXPECT_TRUE(error.contains("abc")) << error.toStdString();
  EXPECT_TRUE(error.contains("expected a number")) << error.toStdString();  // the form allowed
  EXPECT_FALSE(error.contains("0.02\"")) << error.toStdString();            // the good value is not blamed
  EXPECT_TRUE(dialog.countLabel()->text().contains("Fix the values")) << dialog.countLabel()->text().toStdString();
  // Out of range is refused too; fixing the values enables OK.
  dialog.setAxes({{"train.optimizer.lr", {"0.02", "-1"}}});
  EXPECT_FALSE(dialog.acceptable());
  dialog.setAxes({{"train.optimizer.lr", {"0.02", "0.05"}}, {"quant.calibration", {"minmax", "entropy"}}});
  EXPECT_TRUE(dialog.acceptable()) << dialog.valueError(1).toStdString() << dialog.valueError(2).toStdString();
  EXPECT_TRUE(dialog.valueError(1).isEmpty());
  EXPECT_EQ(dialog.countLabel()->text(), "4 runs will be queued.");
  dialog.setAxes({{"train.optimizer.lr", {"0.02"}}, {"quant.calibration", {"minmax", "bogus"}}});
  EXPECT_FALSE(dialog.acceptable());
  EXPECT_TRUE(dialog.valueError(2).contains("bogus")) << dialog.valueError(2).toStdString();
}

}  // namespace lathe::ui
