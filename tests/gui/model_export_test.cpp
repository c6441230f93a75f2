// Export model (ONNX) from the desktop app: the GUI path writes the same bytes as `lathe-cli
// export-model` for the same run and artifact (both call engine/store/model_export.h), a run
// without the artifact asked for is refused with a message naming the run and the kind, the choice
// dialog offers only what the run has (the rest disabled, with why), and the run browser's context
// menu action asks for one run.
#include <gtest/gtest.h>

#include <QApplication>
#include <QFileInfo>
#include <QFileDialog>
#include <QLineEdit>
#include <QMessageBox>
#include <QSettings>
#include <QStandardItemModel>
#include <QTimer>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "app/gui/export_action.h"
#include "app/gui/model_export_action.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/nn/model_io.h"
#include "engine/nn/zoo.h"
#include "engine/store/store.h"
#include "gui_test_util.h"
#include "tests/support/run_shell.h"
#include "widgets/ui/run_browser.h"

namespace lathe::app {
namespace {

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A finished run of the zoo mlp that recorded its trained weights as the "model" artifact.
std::string mlp_run(const test::GuiTempDir& dir) {
  auto mlp = build_zoo_model("mlp");
  ReferenceBackend be;
  Rng rng(21);
  mlp->create_params(be, DType::f32, rng);
  const std::string weights = dir.file("model.safetensors");
  save_model(*mlp, be, weights, {{"lathe_model", "mlp"}});
  RunWriter writer(dir.db());
  RunInfo info;
  info.name = "mlp-export";
  info.config = {{"model", {{"zoo", "mlp"}}}};
  info.backend = "cpu";
  const std::string id = writer.begin_run(info);
  writer.artifact("model", weights);
  writer.finish(RunStatus::finished);
  return id;
}

TEST(GuiModelExport, WritesTheCliBytesAndRefusesAMissingArtifact) {
  test::GuiTempDir dir;
  const std::string id = mlp_run(dir);
  const QString qid = QString::fromStdString(id);

  const std::string gui = dir.file("gui.onnx"), cli = dir.file("cli.onnx");
  QString summary;
  EXPECT_EQ(write_model_file(dir.qdb(), qid, "model", QString::fromStdString(gui), &summary), QString());
  EXPECT_TRUE(summary.contains("from the model weights")) << summary.toStdString();
  const test::CmdResult r =
      test::run_shell(test::cli_path() + " --db " + dir.db() + " export-model " + id + " --artifact model -o " + cli);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string a = bytes_of(gui), b = bytes_of(cli);
  ASSERT_GT(a.size(), 100000u);  // the mlp's f32 weights
  EXPECT_TRUE(a == b) << "the GUI wrote " << a.size() << " bytes, the CLI " << b.size();
  // The default kind (none named) is the same file too.
  const std::string gui_default = dir.file("gui-default.onnx");
  EXPECT_EQ(write_model_file(dir.qdb(), qid, "", QString::fromStdString(gui_default)), QString());
  EXPECT_TRUE(bytes_of(gui_default) == b);

  const std::string none = dir.file("int8.onnx");
  const QString err = write_model_file(dir.qdb(), qid, "model-int8", QString::fromStdString(none));
  EXPECT_TRUE(err.contains("run " + qid + " recorded no model-int8 artifact")) << err.toStdString();
  EXPECT_FALSE(std::filesystem::exists(none));
  EXPECT_TRUE(write_model_file(dir.qdb(), qid, "fp16", QString::fromStdString(none)).contains("allowed: model"));
  EXPECT_FALSE(write_model_file(dir.qdb(), "", "model", QString::fromStdString(none)).isEmpty());
}

TEST(GuiModelExport, TheChoiceOffersOnlyWhatTheRunRecorded) {
  test::GuiTempDir dir;
  const std::string id = mlp_run(dir);
  std::vector<ModelExportChoice> choices;
  {
    Store::OpenOptions opt;
    opt.reap_stale = false;
    const Store store = Store::open(dir.db(), opt);
    choices = model_export_choices(store, id);
    EXPECT_EQ(default_model_export_kind(store, id), "model");
  }
  ModelExportDialog dialog("mlp-export", choices, "model");
  EXPECT_EQ(dialog.kind(), "model");
  auto* items = qobject_cast<QStandardItemModel*>(dialog.kindBox()->model());
  ASSERT_EQ(dialog.kindBox()->count(), 5);  // model, model-f32, pruned, lowrank, model-int8
  for (int row = 0; row < dialog.kindBox()->count(); ++row) {
    const QString kind = dialog.kindBox()->itemData(row).toString();
    EXPECT_EQ(items->item(row)->isEnabled(), kind == "model") << kind.toStdString();
  }
  const QString why = dialog.unavailableLabel()->text();
  EXPECT_TRUE(why.contains("model-int8: run " + QString::fromStdString(id) + " recorded no model-int8 artifact"))
      << why.toStdString();
  EXPECT_TRUE(why.contains("pruned:")) << why.toStdString();
  EXPECT_FALSE(why.contains("model: ")) << why.toStdString();

  // A run with no weights at all: nothing to choose.
  ModelExportDialog empty("x", {{.kind = "model", .label = "f32", .available = false, .why_not = "no weights"}}, "");
  EXPECT_EQ(empty.kind(), QString());
}

// The whole interactive path, its modal dialogs answered by a timer: the choice, the save dialog
// (starting in the remembered folder), the export on its worker thread, the closing message.
TEST(GuiModelExport, TheInteractivePathAsksWritesAndSaysSo) {
  test::GuiTempDir dir;
  const std::string id = mlp_run(dir);
  const QVariant saved_folder = QSettings("lathe", "lathe").value("export/folder");
  const QString folder = QFileInfo(QString::fromStdString(dir.file("x"))).absolutePath();
  remember_export_folder(folder);
  const QString chosen = QString::fromStdString(dir.file("chosen.onnx"));
  QString start_dir, message, chosen_kind;
  QTimer driver;
  driver.setInterval(30);
  QObject::connect(&driver, &QTimer::timeout, [&]() {
    QWidget* w = QApplication::activeModalWidget();
    if (auto* d = qobject_cast<ModelExportDialog*>(w)) {
      chosen_kind = d->kind();
      d->accept();
    } else if (auto* f = qobject_cast<QFileDialog*>(w)) {
      start_dir = f->directory().absolutePath();
      // Typed into the name field as a user would: QFileDialog::selectFile leaves a focused name
      // field alone (Qt 6.4), and the field has focus once the dialog is active.
      auto* name = f->findChild<QLineEdit*>("fileNameEdit");
      ASSERT_NE(name, nullptr);
      name->setText(QFileInfo(chosen).fileName());
      static_cast<QDialog*>(f)->accept();  // QFileDialog::accept (protected there) through QDialog
    } else if (auto* m = qobject_cast<QMessageBox*>(w)) {
      message = m->text();
      m->accept();
    }
  });
  driver.start();
  export_model(nullptr, dir.qdb(), QString::fromStdString(id));
  driver.stop();
  if (saved_folder.isValid())
    QSettings("lathe", "lathe").setValue("export/folder", saved_folder);
  else
    QSettings("lathe", "lathe").remove("export/folder");

  EXPECT_EQ(chosen_kind, "model");
  EXPECT_EQ(start_dir, folder);
  EXPECT_TRUE(message.startsWith("wrote " + chosen)) << message.toStdString();
  const std::string reference = dir.file("reference.onnx");
  ASSERT_EQ(write_model_file(dir.qdb(), QString::fromStdString(id), "model", QString::fromStdString(reference)),
            QString());
  EXPECT_TRUE(bytes_of(chosen.toStdString()) == bytes_of(reference));
}

TEST(GuiModelExport, TheRunBrowserContextMenuAsksForOneRun) {
  test::GuiTempDir dir;
  const std::string id = mlp_run(dir);
  test::write_run(dir.db(), "other", {{"model", {{"zoo", "mlp"}}}}, {});
  ui::RunBrowser browser(dir.qdb());
  ASSERT_TRUE(test::wait_until([&]() { return browser.model()->total() == 2 && !browser.model()->loading(); }, 10000));
  QStringList asked;
  QObject::connect(&browser, &ui::RunBrowser::exportModel, [&asked](const QString& runId) { asked << runId; });
  browser.selectRuns({QString::fromStdString(id)});
  ASSERT_TRUE(test::wait_until([&]() { return browser.selectedRunIds().size() == 1; }, 5000));
  EXPECT_TRUE(browser.exportModelAction()->isEnabled());
  browser.exportModelAction()->trigger();
  ASSERT_EQ(asked.size(), 1);
  EXPECT_EQ(asked.front().toStdString(), id);
  browser.table()->selectAll();
  ASSERT_TRUE(test::wait_until([&]() { return browser.selectedRunIds().size() == 2; }, 5000));
  EXPECT_FALSE(browser.exportModelAction()->isEnabled());
}

}  // namespace
}  // namespace lathe::app
