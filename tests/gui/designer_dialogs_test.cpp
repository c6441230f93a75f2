// Designer and dialogs that keep the user's work and say what is true: the path label follows what
// is shown (a file, a run's config) and marks edits; Save as never starts on a preset; SGD greys out
// AdamW's knobs and back; a fixed config clears the stale "Config has errors"; a queued run starting
// does not pull the user to the Live tab; the export dialog remembers its folder.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QStatusBar>

#include "app/gui/export_action.h"
#include "app/gui/main_window.h"
#include "engine/run/cost_model.h"
#include "gui_test_util.h"
#include "widgets/ui/designer_panel.h"

namespace lathe::ui {

TEST(GuiDesigner, LabelFollowsWhatIsShownAndMarksEdits) {
  const QString presets = QString::fromStdString(test::experiments_dir());
  DesignerPanel d(presets);
  ASSERT_TRUE(d.loadFile(presets + "/mlp.json", false).isEmpty());
  EXPECT_TRUE(d.fileLabel().endsWith("mlp.json")) << d.fileLabel().toStdString();
  EXPECT_FALSE(d.isModified());
  d.form()->field("train.epochs")->setValue(7);
  EXPECT_TRUE(d.isModified());
  EXPECT_TRUE(d.fileLabel().contains("modified")) << d.fileLabel().toStdString();
  ASSERT_TRUE(d.loadFile(presets + "/cnn.json", false).isEmpty());  // non-interactive: no prompt
  EXPECT_TRUE(d.fileLabel().endsWith("cnn.json")) << d.fileLabel().toStdString();
  EXPECT_FALSE(d.isModified());
  d.setConfig({{"name", "from-run"}}, "(config of run 2026-abc, not saved)");
  EXPECT_EQ(d.fileLabel(), "(config of run 2026-abc, not saved)");
  EXPECT_TRUE(d.currentFile().isEmpty());
}

TEST(GuiDesigner, LabelNamesPresetsAndHomeFilesShortly) {
  // No machine's folders on screen (README screenshots included): a preset by its folder's name,
  // a file at home under "~"; the tooltip keeps the full path.
  const QString presets = QString::fromStdString(test::experiments_dir());
  DesignerPanel d(presets);
  ASSERT_TRUE(d.loadFile(presets + "/mlp.json", false).isEmpty());
  EXPECT_EQ(d.fileLabel(), "experiments/mlp.json");
  test::GuiTempDir dir;
  const QByteArray home = qgetenv("HOME");
  qputenv("HOME", QByteArray::fromStdString(dir.file("home")));
  EXPECT_EQ(d.displayPath(QString::fromStdString(dir.file("home/runs/my.json"))), "~/runs/my.json");
  qputenv("HOME", home);
  EXPECT_EQ(d.displayPath("/srv/shared/x.json"), "/srv/shared/x.json");
}

TEST(GuiDesigner, SaveAsNeverStartsOnAPreset) {
  const QString presets = QString::fromStdString(test::experiments_dir());
  DesignerPanel d(presets);
  ASSERT_TRUE(d.loadFile(presets + "/mlp.json", false).isEmpty());
  const QString path = d.saveAsDefaultPath();
  EXPECT_NE(QFileInfo(path).absolutePath(), QFileInfo(presets).absoluteFilePath()) << path.toStdString();
  EXPECT_TRUE(path.endsWith("mlp-copy.json")) << path.toStdString();
  test::GuiTempDir dir;
  const QString own = QString::fromStdString(dir.file("mine.json"));
  ASSERT_TRUE(d.saveFile(own).isEmpty());
  EXPECT_EQ(d.saveAsDefaultPath(), own);  // the user's own file is fine to save over
}

TEST(GuiDesigner, OptimizerKnobsFollowTheOptimizer) {
  DesignerPanel d(QString::fromStdString(test::experiments_dir()));
  ExperimentForm* f = d.form();
  f->field("train.optimizer.type")->setValue("sgd");
  EXPECT_FALSE(f->field("train.optimizer.beta1")->widget()->isEnabled());
  EXPECT_FALSE(f->field("train.optimizer.eps")->widget()->isEnabled());
  EXPECT_TRUE(f->field("train.optimizer.momentum")->widget()->isEnabled());
  EXPECT_TRUE(f->field("train.optimizer.beta1")->widget()->toolTip().contains(
      "Only used when train.optimizer.type is \"adamw\""));  // the schema's applies_when
  f->field("train.optimizer.type")->setValue("adamw");
  EXPECT_TRUE(f->field("train.optimizer.beta1")->widget()->isEnabled());
  EXPECT_FALSE(f->field("train.optimizer.momentum")->widget()->isEnabled());
  EXPECT_FALSE(f->field("train.optimizer.nesterov")->widget()->isEnabled());
  f->setConfig({{"train", {{"optimizer", {{"type", "sgd"}}}}}});
  EXPECT_FALSE(f->field("train.optimizer.beta2")->widget()->isEnabled());
}

TEST(GuiDesigner, InstanceIsPickedFromTheCatalogAndAGpuBoxForACpuRunIsNoted) {
  DesignerPanel d(QString::fromStdString(test::experiments_dir()));
  ExperimentForm* f = d.form();
  auto* combo = qobject_cast<QComboBox*>(f->field("cost.instance")->widget());
  ASSERT_NE(combo, nullptr) << "cost.instance is free text";
  const PriceCatalog catalog = PriceCatalog::load(PriceCatalog::default_path());
  EXPECT_EQ(combo->count(), static_cast<int>(catalog.names().size()));
  std::string gpu_box;
  for (const InstancePrice& p : catalog.instances())
    if (p.gpus > 0 && gpu_box.empty())
      gpu_box = p.name;
  ASSERT_FALSE(gpu_box.empty());
  f->field("compute.backend")->setValue("cpu");
  f->field("cost.instance")->setValue(gpu_box);
  EXPECT_TRUE(f->note("cost.instance").contains("GPU")) << f->note("cost.instance").toStdString();
  EXPECT_TRUE(f->field("cost.instance")->widget()->toolTip().startsWith("Note:"));
  f->validate();  // still a valid config, and the note stays
  EXPECT_TRUE(f->errors().isEmpty());
  EXPECT_TRUE(f->note("cost.instance").contains(QString::fromStdString(gpu_box)));
  f->field("cost.instance")->setValue("local");
  EXPECT_TRUE(f->note("cost.instance").isEmpty());
}

}  // namespace lathe::ui

namespace lathe::app {

TEST(GuiDialogs, StaleErrorsGoAndRunsStartWithoutYankingTheUser) {
  test::GuiTempDir dir;
  WindowOptions o;
  o.dbPath = dir.qdb();
  o.cliPath = QString::fromStdString(test::cli_path());
  o.experimentsDir = QString::fromStdString(test::experiments_dir());
  MainWindow w(o);
  w.setInteractive(false);
  w.designer()->form()->field("train.epochs")->setValue(-1);
  w.designer()->form()->validate();
  EXPECT_TRUE(w.statusBar()->currentMessage().startsWith("Config has errors"))
      << w.statusBar()->currentMessage().toStdString();
  w.designer()->form()->field("train.epochs")->setValue(2);
  w.designer()->form()->validate();
  EXPECT_FALSE(w.statusBar()->currentMessage().startsWith("Config has errors"));

  w.showTab("runs");
  emit w.queue()->runStarted("20260101-000000-abcdef", "queued sweep run");
  EXPECT_EQ(w.tabs()->tabText(w.tabs()->currentIndex()), "Runs");
  EXPECT_EQ(w.feed()->watched(), "20260101-000000-abcdef");
}

TEST(GuiDialogs, ExportRemembersTheFolder) {
  test::GuiTempDir dir;
  qputenv("XDG_CONFIG_HOME", QByteArray::fromStdString(dir.file("config")));
  const QString folder = QString::fromStdString(dir.file(""));
  EXPECT_EQ(last_export_folder(), QDir::homePath());
  remember_export_folder(folder);
  EXPECT_EQ(QDir(last_export_folder()), QDir(folder));
  qunsetenv("XDG_CONFIG_HOME");
}

}  // namespace lathe::app
