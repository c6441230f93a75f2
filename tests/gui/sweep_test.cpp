// Sweeps a user can tell apart: each run is named by its values ("mlp-fashion lr=0.02"), the run
// table gets a column per sweep knob, and the sweep dialog refuses "0.02, abc" at the field with
// the form allowed (OK disabled) instead of queuing a run that fails.
#include <gtest/gtest.h>

#include <QImage>
#include <QProcess>
#include <QPushButton>
#include <algorithm>
#include <array>
#include <filesystem>

#include "engine/run/config.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"
#include "gui_test_util.h"
#include "tests/support/two_sweeps.h"
#include "widgets/ui/folder_importer.h"
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

namespace lathe::ui {

// The Sweep dialog's runs become a stored sweep (members with planned run ids); the run browser
// lists it with its progress and filters to its runs.
TEST(GuiStoredSweep, BrowserShowsProgressAndFiltersToTheSweep) {
  test::GuiTempDir dir;
  const nlohmann::json base = {{"name", "mlp-fashion"}, {"model", {{"zoo", "mlp"}}}};
  const std::vector<SweepAxis> axes = {{"train.optimizer.lr", {"0.02", "0.05", "0.1"}}};
  std::vector<SweepRun> runs = plan_sweep(base, axes);
  const std::string sweep_id = store_sweep(dir.db(), base, axes, runs);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_NE(runs[0].run_id, runs[1].run_id);
  {
    Store s = Store::open(dir.db());
    for (int i = 0; i < 2; ++i) {  // two of the three ran and finished
      RunInfo info;
      info.id = runs[i].run_id;
      info.name = runs[i].name;
      s.create_run(info, RunStatus::finished);
    }
    const std::vector<SweepMemberRecord> members = sweep_members(s, sweep_id);
    ASSERT_EQ(members.size(), 3u);
    EXPECT_EQ(nlohmann::json::parse(members[2].config_json)["train"]["optimizer"]["lr"], 0.1);
    EXPECT_EQ(members[2].state, MemberState::pending);
  }
  test::write_run(dir.db(), "plain", {{"model", {{"zoo", "cnn"}}}}, {});

  RunBrowser browser(dir.qdb());
  RunTableModel* model = browser.model();
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 3 && !model->loading(); }, 10000));
  QComboBox* sweeps = browser.sweepFilter();
  ASSERT_EQ(sweeps->count(), 2);
  EXPECT_EQ(sweeps->itemText(1), "mlp-fashion  2/3  running");
  EXPECT_EQ(sweeps->itemData(1).toString().toStdString(), sweep_id);
  sweeps->setCurrentIndex(1);
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 2 && !model->loading(); }, 10000));
  QStringList names;
  for (int r = 0; r < model->rowCount(); ++r)
    names << model->data(model->index(r, 0), Qt::DisplayRole).toString();
  names.sort();
  EXPECT_EQ(names, (QStringList{"mlp-fashion lr=0.02", "mlp-fashion lr=0.05"}));
  browser.showSweep("");
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 3 && !model->loading(); }, 10000));
}

// `lathe --sweep REF` (README screenshots): a sweep named by name or id prefix narrows the run
// table and the parallel coordinates to its runs; a name no sweep has is refused with the reason
// and leaves the filter alone. The real binary takes the flag, and exits 2 naming a bad one.
TEST(GuiStoredSweep, ChosenByNameTheTableAndParallelCoordinatesHoldItsRunsOnly) {
  test::GuiTempDir dir;
  const test::TwoSweeps sweeps = test::write_two_sweeps(dir.db());
  ASSERT_NE(sweeps.a, sweeps.b);
  std::vector<std::string> a_runs = sweeps.a_runs;

  RunBrowser browser(dir.qdb());
  RunTableModel* model = browser.model();
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 6 && !model->loading(); }, 10000));
  EXPECT_EQ(browser.showSweepRef("study-a").toStdString(), "");
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 3 && !model->loading(); }, 10000));
  EXPECT_EQ(browser.sweepFilter()->currentText().left(7), "study-a");
  const QString refused = browser.showSweepRef("no-such-study");
  EXPECT_TRUE(refused.contains("no-such-study")) << refused.toStdString();
  EXPECT_EQ(browser.sweepFilter()->currentText().left(7), "study-a");  // left as it was

  ParallelCoordsPanel* panel = browser.parallelPanel();
  ASSERT_EQ(test::open_parallel(browser), "");
  std::vector<std::string> ids = panel->runs().ids;
  std::sort(ids.begin(), ids.end());
  std::sort(a_runs.begin(), a_runs.end());
  EXPECT_EQ(ids, a_runs);

  // The app's flag: a good sweep renders, a bad one exits 2 with the reason.
  const QString lathe = QString(LATHE_TEST_BINARY_DIR) + "/app/gui/lathe";
  const QString png = QString::fromStdString(dir.file("sweep.png"));
  QProcess ok;
  ok.start(lathe, {"--db", dir.qdb(), "--sweep", "study-b", "--parallel", "default", "--screenshot", png,
                   "--wait-ms", "300", "--size", "1400x900"});
  ASSERT_TRUE(ok.waitForFinished(60000));
  EXPECT_EQ(ok.exitCode(), 0) << ok.readAllStandardError().toStdString();
  EXPECT_EQ(QImage(png).width(), 1400);  // wider than the window's minimum
  QProcess bad;
  bad.start(lathe, {"--db", dir.qdb(), "--sweep", "no-such-study", "--screenshot", png});
  ASSERT_TRUE(bad.waitForFinished(60000));
  EXPECT_EQ(bad.exitCode(), 2);
  const std::string err = bad.readAllStandardError().toStdString();
  EXPECT_NE(err.find("--sweep: "), std::string::npos) << err;
  EXPECT_NE(err.find("no-such-study"), std::string::npos) << err;
}

}  // namespace lathe::ui

namespace lathe::ui {

// A Slurm sweep's folder of per-task stores, followed by the GUI: the first import brings the runs
// and every sample, the next adds nothing, a task store that gains a run is picked up.
TEST(GuiFolderImporter, ImportsNewRunsOnceAndFollowsTheFolder) {
  test::GuiTempDir dir;
  const std::filesystem::path shared = std::filesystem::path(dir.db()).parent_path() / "shared" / "stores";
  std::filesystem::create_directories(shared);
  test::write_run((shared / "member-0.db").string(), "m0", {{"seed", 0}}, {{"test/accuracy", {0.5, 0.6, 0.7}}});
  test::write_run((shared / "member-1.db").string(), "m1", {{"seed", 1}}, {{"test/accuracy", {0.4, 0.5}}});
  FolderImporter importer(dir.qdb());
  std::vector<std::array<qint64, 3>> got;
  QObject::connect(&importer, &FolderImporter::imported,
                   [&](int added, int updated, qint64 samples) { got.push_back({added, updated, samples}); });
  importer.watch(QString::fromStdString(shared.parent_path().string()), 60'000);
  ASSERT_TRUE(test::wait_until([&]() { return got.size() == 1; }, 10000));
  EXPECT_EQ(got[0][0], 2);
  EXPECT_EQ(got[0][2], 5);
  ASSERT_TRUE(importer.importNow());
  ASSERT_TRUE(test::wait_until([&]() { return got.size() == 2; }, 10000));
  EXPECT_EQ(got[1], (std::array<qint64, 3>{0, 0, 0}));
  test::write_run((shared / "member-2.db").string(), "m2", {{"seed", 2}}, {{"test/accuracy", {0.9}}});
  ASSERT_TRUE(importer.importNow());
  ASSERT_TRUE(test::wait_until([&]() { return got.size() == 3; }, 10000));
  EXPECT_EQ(got[2][0], 1);
  EXPECT_EQ(got[2][2], 1);
  Store s = Store::open(dir.db(), Store::read_only_options());
  EXPECT_EQ(s.list_runs().total, 3);
  RunQuery q;
  q.name_glob = "m0";
  const RunPage page = s.list_runs(q);
  ASSERT_EQ(page.total, 1);
  ASSERT_NE(page.runs[0].metric("test/accuracy"), nullptr);
  EXPECT_DOUBLE_EQ(page.runs[0].metric("test/accuracy")->last, 0.7);
  EXPECT_EQ(page.runs[0].metric("test/accuracy")->count, 3);
}

}  // namespace lathe::ui
