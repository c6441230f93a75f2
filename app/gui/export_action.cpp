// export_runs / write_report_file (see export_action.h).
#include "app/gui/export_action.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QSettings>

#include "engine/store/store.h"
#ifdef LATHE_HAVE_REPORT
#include "widgets/report/report.h"
#endif

namespace lathe::app {

QString write_report_file(const QString& dbPath, const QStringList& runIds, const QString& path) {
  if (runIds.isEmpty())
    return "No run to export: select one or more runs in Runs (or watch a run) first.";
#ifdef LATHE_HAVE_REPORT
  try {
    const auto format = report::parse_format(QFileInfo(path).suffix().toStdString());
    Store::OpenOptions opt;
    opt.reap_stale = false;
    const Store store = Store::open(dbPath.toStdString(), opt);
    std::vector<std::string> ids;
    for (const QString& id : runIds)
      ids.push_back(id.toStdString());
    report::write_report(store, ids, format, path.toStdString());
    return {};
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
#else
  (void)dbPath;
  (void)path;
  return "The report writer (widgets/report, library lathe_report) is not part of this build, so Export is not "
         "available. Use `lathe-cli export RUN --format csv -o FILE` for the samples.";
#endif
}

QString last_export_folder() {
  const QString dir = QSettings("lathe", "lathe").value("export/folder").toString();
  return !dir.isEmpty() && QDir(dir).exists() ? dir : QDir::homePath();
}

void remember_export_folder(const QString& folder) { QSettings("lathe", "lathe").setValue("export/folder", folder); }

void export_runs(QWidget* parent, const QString& dbPath, const QStringList& runIds) {
  if (runIds.isEmpty()) {
    QMessageBox::information(parent, "Export", "Select one or more runs in Runs (or watch a run) first.");
    return;
  }
  QString selected;
  const QString name = runIds.size() == 1 ? "run-report.html" : "comparison.html";
  const QString path =
      QFileDialog::getSaveFileName(parent, "Export report", QDir(last_export_folder()).filePath(name),
                                   "HTML report (*.html);;PDF report (*.pdf);;CSV of all samples (*.csv)", &selected);
  if (path.isEmpty())
    return;
  QString file = path;
  if (QFileInfo(file).suffix().isEmpty())
    file += selected.contains("pdf") ? ".pdf" : selected.contains("csv") ? ".csv" : ".html";
  const QString err = write_report_file(dbPath, runIds, file);
  if (err.isEmpty())
    remember_export_folder(QFileInfo(file).absolutePath());
  if (err.isEmpty())
    QMessageBox::information(parent, "Export", "Wrote " + file);
  else
    QMessageBox::warning(parent, "Export failed", err + "\n\nChoose another file name or folder (html, pdf or csv).");
}

}  // namespace lathe::app
