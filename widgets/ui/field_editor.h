// One editor widget per schema field kind (integer: spin box, number: line edit, boolean: check
// box, enumeration: combo box, string: line edit, object_list: JSON text), built from the field's
// entry in schema_as_json(). Values go in and out as JSON so the form never interprets them:
// whatever the user types reaches validate_config(), which decides and explains.
#pragma once

#include <QString>
#include <QWidget>
#include <nlohmann/json.hpp>

namespace lathe::ui {

class FieldEditor {
 public:
  /// `field` is one element of schema_as_json()["fields"]. The widget is parented to `parent`.
  FieldEditor(const nlohmann::json& field, QWidget* parent);

  const nlohmann::json& spec() const { return m_spec; }
  QString path() const { return m_path; }
  QWidget* widget() const { return m_widget; }
  nlohmann::json value() const;
  void setValue(const nlohmann::json& value);
  /// Marks (non-empty message) or clears the field; the tooltip then leads with the message.
  void setError(const QString& message);
  QString error() const { return m_error; }
  /// The tooltip: doc, what is allowed, the default, when the field is used (the schema's
  /// applies_when), and why an unsupported field is disabled.
  QString baseToolTip() const;
  /// Connects `fn` to every edit of the widget.
  void onEdited(QObject* context, std::function<void()> fn);

 private:
  nlohmann::json m_spec;
  QString m_path, m_kind, m_error;
  QWidget* m_widget = nullptr;
};

}  // namespace lathe::ui
