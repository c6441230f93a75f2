// export_model / write_model_file / ModelExportDialog (see model_export_action.h).
#include "app/gui/model_export_action.h"

#include <QDialogButtonBox>
#include <QDir>
#include <QEventLoop>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QProgressDialog>
#include <QPushButton>
#include <QStandardItemModel>
#include <QThread>
#include <QVBoxLayout>

#include "app/gui/export_action.h"
#include "engine/store/store.h"

namespace lathe::app {

namespace {

Store open_store(const QString& dbPath) {
  Store::OpenOptions opt;
  opt.reap_stale = false;  // only reading: never marks another process's run interrupted
  return Store::open(dbPath.toStdString(), opt);
}

}  // namespace

QString write_model_file(const QString& dbPath, const QString& runId, const QString& kind, const QString& path,
                         QString* summary) {
  if (runId.isEmpty())
    return "No run to export: select one run in Runs first.";
  try {
    const Store store = open_store(dbPath);
    const ModelExportResult r =
        export_run_model(store, store.resolve_run(runId.toStdString()), kind.toStdString(), path.toStdString());
    if (summary)
      *summary = QString::fromStdString(r.summary);
    return {};
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
}

ModelExportDialog::ModelExportDialog(const QString& runLabel, const std::vector<ModelExportChoice>& choices,
                                     const QString& preferred, QWidget* parent)
    : QDialog(parent) {
  setWindowTitle("Export model (ONNX)");
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(new QLabel("Which weights of run " + runLabel + " to write as ONNX:", this));
  m_kinds = new QComboBox(this);
  m_kinds->setObjectName("modelExportKind");
  auto* items = qobject_cast<QStandardItemModel*>(m_kinds->model());
  QStringList missing;
  int first = -1;
  for (const ModelExportChoice& c : choices) {
    const QString kind = QString::fromStdString(c.kind);
    m_kinds->addItem(kind + " - " + QString::fromStdString(c.label), kind);
    const int row = m_kinds->count() - 1;
    if (c.available) {
      m_kinds->setItemData(row, QString::fromStdString(c.path), Qt::ToolTipRole);
      if (first < 0 || kind == preferred)
        first = row;
    } else {
      items->item(row)->setEnabled(false);
      m_kinds->setItemData(row, QString::fromStdString(c.why_not), Qt::ToolTipRole);
      missing << kind + ": " + QString::fromStdString(c.why_not);
    }
  }
  if (first >= 0)
    m_kinds->setCurrentIndex(first);
  layout->addWidget(m_kinds);
  m_unavailable = new QLabel(missing.isEmpty() ? QString() : "Not available:\n" + missing.join("\n"), this);
  m_unavailable->setObjectName("modelExportUnavailable");
  m_unavailable->setWordWrap(true);
  layout->addWidget(m_unavailable);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  buttons->button(QDialogButtonBox::Ok)->setText("Choose file...");
  buttons->button(QDialogButtonBox::Ok)->setEnabled(first >= 0);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  layout->addWidget(buttons);
}

QString ModelExportDialog::kind() const {
  const int row = m_kinds->currentIndex();
  auto* items = qobject_cast<QStandardItemModel*>(m_kinds->model());
  if (row < 0 || !items->item(row)->isEnabled())
    return {};
  return m_kinds->currentData().toString();
}

void export_model(QWidget* parent, const QString& dbPath, const QString& runId) {
  if (runId.isEmpty()) {
    QMessageBox::information(parent, "Export model", "Select one run in Runs first.");
    return;
  }
  std::vector<ModelExportChoice> choices;
  QString preferred, label = runId;
  try {
    const Store store = open_store(dbPath);
    const std::string id = store.resolve_run(runId.toStdString());
    choices = model_export_choices(store, id);
    preferred = QString::fromStdString(default_model_export_kind(store, id));
    const RunRecord run = store.run(id);
    if (!run.name.empty())
      label = QString::fromStdString(run.name) + " (" + QString::fromStdString(id.substr(0, 8)) + ")";
  } catch (const std::exception& e) {
    QMessageBox::warning(parent, "Export model failed", "Could not read run " + runId + ": " + e.what());
    return;
  }
  ModelExportDialog choose(label, choices, preferred, parent);
  if (choose.kind().isEmpty()) {
    QMessageBox::information(parent, "Export model",
                             "Run " + label + " has no weights to export.\n\n" + choose.unavailableLabel()->text());
    return;
  }
  if (choose.exec() != QDialog::Accepted || choose.kind().isEmpty())
    return;
  const QString kind = choose.kind();
  const QString suggested = QDir(last_export_folder()).filePath(runId.left(8) + "-" + kind + ".onnx");
  QString file = QFileDialog::getSaveFileName(parent, "Export model (ONNX)", suggested, "ONNX model (*.onnx)");
  if (file.isEmpty())
    return;
  if (QFileInfo(file).suffix().isEmpty())
    file += ".onnx";

  // The export reads weights and writes the file off the GUI thread; the dialog says what is going on.
  QProgressDialog progress("Writing " + kind + " of run " + label + " to " + file + "...", QString(), 0, 0, parent);
  progress.setWindowTitle("Export model (ONNX)");
  progress.setWindowModality(Qt::WindowModal);
  progress.setMinimumDuration(300);
  QString err, summary;
  QEventLoop loop;
  QThread* worker =
      QThread::create([&]() { err = write_model_file(dbPath, runId, kind, file, &summary); });
  QObject::connect(worker, &QThread::finished, &loop, &QEventLoop::quit);
  worker->start();
  loop.exec();
  worker->wait();
  delete worker;
  progress.close();

  if (err.isEmpty()) {
    remember_export_folder(QFileInfo(file).absolutePath());
    QMessageBox::information(parent, "Export model", summary);
  } else {
    QMessageBox::warning(parent, "Export model failed",
                         "Writing the " + kind + " model of run " + label + " to " + file + " failed:\n\n" + err);
  }
}

}  // namespace lathe::app
