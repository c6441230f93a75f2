// The Export model (ONNX) action: which of a run's weights to write (the kinds the run recorded;
// the others shown disabled with what is missing), a save dialog starting in the last export
// folder, then lathe::export_run_model (engine/store/model_export.h, the code `lathe-cli
// export-model` runs) on a worker thread behind a progress dialog, and a dialog naming the file
// written or what failed.
#pragma once

#include <QComboBox>
#include <QDialog>
#include <QLabel>
#include <QString>
#include <QWidget>
#include <vector>

#include "engine/store/model_export.h"

namespace lathe::app {

/// Writes run `runId`'s `kind` weights ("" = the CLI's default) as ONNX to `path`. Returns "" or
/// the error text (what failed and why); `summary` gets the line the CLI prints.
QString write_model_file(const QString& dbPath, const QString& runId, const QString& kind, const QString& path,
                         QString* summary = nullptr);

/// The artifact choice: one entry per kind, the ones the run lacks disabled, with why below.
class ModelExportDialog : public QDialog {
  Q_OBJECT
 public:
  ModelExportDialog(const QString& runLabel, const std::vector<ModelExportChoice>& choices, const QString& preferred,
                    QWidget* parent = nullptr);
  QComboBox* kindBox() const { return m_kinds; }
  /// The kind chosen ("" when the run has none available).
  QString kind() const;
  /// The "not available" lines, one per kind the run lacks.
  QLabel* unavailableLabel() const { return m_unavailable; }

 private:
  QComboBox* m_kinds;
  QLabel* m_unavailable;
};

/// Interactive, for one run: choice dialog, save dialog, export with progress, result dialog.
void export_model(QWidget* parent, const QString& dbPath, const QString& runId);

}  // namespace lathe::app
