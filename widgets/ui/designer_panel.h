// DesignerPanel: the experiment designer: a preset chooser (experiments/*.json), Open / Save of
// the JSON document, and the schema-generated ExperimentForm.
#pragma once

#include <QComboBox>
#include <QLabel>
#include <QWidget>
#include <nlohmann/json.hpp>

#include "widgets/ui/experiment_form.h"

namespace lathe::ui {

class DesignerPanel : public QWidget {
  Q_OBJECT
 public:
  DesignerPanel(QString presetsDir, QWidget* parent = nullptr);
  ExperimentForm* form() const { return m_form; }
  /// Loads a JSON file into the form. Returns "" or the error text (also shown in a dialog when
  /// `interactive`).
  QString loadFile(const QString& path, bool interactive = true);
  QString saveFile(const QString& path);
  QString currentFile() const { return m_file; }
  QString presetsDir() const { return m_presetsDir; }

 signals:
  void message(const QString& text);

 private:
  QString m_presetsDir, m_file;
  QComboBox* m_presets;
  QLabel* m_fileLabel;
  ExperimentForm* m_form;
};

}  // namespace lathe::ui
