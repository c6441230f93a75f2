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
  /// Shows a config that comes from no file (a run's): the label says where it is from.
  void setConfig(const nlohmann::json& config, const QString& origin);
  /// Edited since it was loaded or saved (the label says "modified"; loading another prompts).
  bool isModified() const { return m_modified; }
  QString fileLabel() const { return m_fileLabel->text(); }
  /// Where Save as starts: never a preset itself (one Enter from overwriting it), but a new file
  /// of the same name in the user's documents folder.
  QString saveAsDefaultPath() const;
  QString presetsDir() const { return m_presetsDir; }
  /// What `lathe-cli devices --json` lists (app/cli_devices.h): compute.devices' spin box is capped
  /// at its max_devices and the line under the form names the GPUs or "CPU ranks: N cores, T threads
  /// each" (T for the devices chosen now).
  void setDevices(const nlohmann::json& devices);
  QString devicesText() const { return m_devicesLabel->text(); }
  /// How a file is named on screen: a preset as "experiments/mlp.json", a file under the home
  /// folder as "~/...", anything else by its absolute path (the full path is the label's tooltip).
  QString displayPath(const QString& path) const;

 signals:
  void message(const QString& text);

 private:
  void updateLabel();
  /// false when the user keeps the edits (asked only when `interactive` and modified).
  bool mayDiscardEdits(bool interactive);
  QString m_presetsDir, m_file, m_origin = "(new experiment)";
  bool m_modified = false;
  QComboBox* m_presets;
  QLabel* m_fileLabel;
  QLabel* m_devicesLabel;
  nlohmann::json m_devices;
  void updateDevicesLabel();
  ExperimentForm* m_form;
};

}  // namespace lathe::ui
