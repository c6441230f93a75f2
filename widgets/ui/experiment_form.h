// The experiment designer form, generated at run time from lathe::schema_as_json(): one editor per
// schema field (field_editor.h), grouped by the field's section, so a knob added to the engine
// appears here with no GUI code. config() gives the JSON document back; validate() runs the same
// validate_config() lathe-cli uses and marks each failing field with the validator's line.
#pragma once

#include <QLabel>
#include <QMap>
#include <QTimer>
#include <QWidget>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "widgets/ui/field_editor.h"

namespace lathe::ui {

class ExperimentForm : public QWidget {
  Q_OBJECT
 public:
  explicit ExperimentForm(QWidget* parent = nullptr);
  ~ExperimentForm() override;

  /// Shows `cfg` (keys the schema does not know are kept and reported by validate()).
  void setConfig(const nlohmann::json& cfg);
  /// The document: the loaded keys plus every field that applies and whose value differs from its
  /// default (a field that does not apply keeps its editor's value but is not written unless the
  /// loaded document had it).
  nlohmann::json config() const;
  /// validate_config(config()); marks the failing fields. Returns the validated config, or null
  /// (with the errors shown) when it is invalid.
  nlohmann::json validate();

  QStringList fieldPaths() const;
  FieldEditor* field(const QString& path) const;
  QStringList sections() const { return m_sections; }
  /// The last validation's lines, all of them (mapped to a field or not).
  QStringList errors() const { return m_errors; }
  /// Whether a field applies to the config as it is now: the engine's field_applies (the schema's
  /// applies_when) against the values the editors show (data.image_size only for data.dataset
  /// "folder", AdamW's betas only under AdamW, distill.* only with a teacher, ...). A field that
  /// does not apply is disabled, its tooltip saying when it applies and why it does not now, and
  /// follows every edit of the fields it depends on.
  bool applies(const QString& path) const;
  /// A note on a field that is valid but probably not meant ("" when none): a GPU instance priced
  /// for a CPU run.
  QString note(const QString& path) const;

 signals:
  /// After every edit (validation follows on a short timer).
  void edited();
  void validated(bool ok, const QString& message);

 private:
  void build();
  void clearErrors();
  void applyDependencies();
  /// Every editor's value at its path (set by the user or the default it shows): the document the
  /// schema's conditions are evaluated against.
  nlohmann::json shownValues() const;
  bool applies(const QString& path, const nlohmann::json& shown) const;

  std::vector<std::unique_ptr<FieldEditor>> m_fields;
  QMap<QString, FieldEditor*> m_byPath;
  QMap<QString, QLabel*> m_labels;
  QStringList m_sections, m_errors;
  QLabel* m_errorBox = nullptr;
  QTimer m_validateTimer;
  nlohmann::json m_base = nlohmann::json::object();
  bool m_loading = false;
  QMap<QString, QString> m_notes;
  QMap<QString, int> m_gpuInstances;  ///< catalog instances with GPUs, and how many
};

}  // namespace lathe::ui
