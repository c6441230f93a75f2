// RunOverview: everything about one run on one page, the same content as its single-run report
// (facts, stage results dense vs compressed with units, metric summary, config, events and notes,
// artifacts), read from the store, with a button that opens the run's folder and one that exports
// the run's model as ONNX (model_export_action.h). Shown for a run
// double-clicked in Runs and in the Live tab when the watched run ends.
#pragma once

#include <QLabel>
#include <QPushButton>
#include <QString>
#include <QTextBrowser>
#include <QWidget>

namespace lathe::app {

class RunOverview : public QWidget {
  Q_OBJECT
 public:
  explicit RunOverview(QString dbPath, QWidget* parent = nullptr);
  /// Reads the run and shows it; false (with the reason shown) when it cannot be read.
  bool showRun(const QString& runId);
  QString runId() const { return m_runId; }
  /// The HTML shown (the print flavor of the single-run report, without charts).
  QString html() const { return m_html; }
  /// The run's folder (where its artifacts are), "" when it has none on this machine.
  QString folder() const { return m_folder; }
  QTextBrowser* view() const { return m_view; }
  QPushButton* openFolderButton() const { return m_openFolder; }
  QPushButton* exportModelButton() const { return m_exportModel; }

 private:
  QString m_db, m_runId, m_html, m_folder;
  QLabel* m_title;
  QTextBrowser* m_view;
  QPushButton* m_openFolder;
  QPushButton* m_exportModel;
};

}  // namespace lathe::app
