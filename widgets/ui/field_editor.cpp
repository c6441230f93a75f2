// FieldEditor: a schema field -> a Qt editor (see field_editor.h).
#include "widgets/ui/field_editor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QSpinBox>
#include <climits>

namespace lathe::ui {
namespace {

QString fromJsonText(const nlohmann::json& v) {
  if (v.is_null())
    return {};
  if (v.is_string())
    return QString::fromStdString(v.get<std::string>());
  return QString::fromStdString(v.dump());
}

}  // namespace

FieldEditor::FieldEditor(const nlohmann::json& field, QWidget* parent)
    : m_spec(field),
      m_path(QString::fromStdString(field.at("path").get<std::string>())),
      m_kind(QString::fromStdString(field.at("kind").get<std::string>())) {
  if (m_kind == "integer") {
    auto* spin = new QSpinBox(parent);
    spin->setRange(INT_MIN, INT_MAX);  // the validator, not the widget, says what is allowed
    spin->setAccelerated(true);
    m_widget = spin;
  } else if (m_kind == "boolean") {
    m_widget = new QCheckBox(parent);
  } else if (m_kind == "enumeration") {
    auto* combo = new QComboBox(parent);
    for (const auto& c : field.value("choices", nlohmann::json::array()))
      combo->addItem(QString::fromStdString(c.get<std::string>()));
    m_widget = combo;
  } else if (m_kind == "string" && field.contains("suggestions")) {  // a list to pick from (cost.instance)
    auto* combo = new QComboBox(parent);
    combo->setEditable(true);
    for (const auto& c : field["suggestions"])
      combo->addItem(QString::fromStdString(c.get<std::string>()));
    m_widget = combo;
  } else if (m_kind == "object_list") {
    auto* text = new QPlainTextEdit(parent);
    text->setMaximumHeight(90);
    text->setPlaceholderText("JSON list, e.g. [{\"type\": \"linear\", \"out\": 10}]");
    m_widget = text;
  } else {  // number, string and anything a newer schema adds: free text
    auto* line = new QLineEdit(parent);
    if (field.contains("default") && field["default"].is_null())
      line->setPlaceholderText("auto (derived when empty)");
    m_widget = line;
  }
  m_widget->setObjectName(m_path);
  m_widget->setProperty("schemaKind", m_kind);
  const bool supported = field.value("supported", true);
  m_widget->setEnabled(supported);
  m_widget->setToolTip(baseToolTip());
  setValue(field.value("default", nlohmann::json()));
}

QString FieldEditor::baseToolTip() const {
  QString tip = QString::fromStdString(m_spec.value("doc", std::string()));
  if (m_spec.contains("allowed"))
    tip += "\nAllowed: " + QString::fromStdString(m_spec["allowed"].get<std::string>());
  else if (m_spec.contains("choices"))
    tip += "\nAllowed: " + fromJsonText(m_spec["choices"]);
  tip += "\nDefault: " +
         (m_spec.value("default", nlohmann::json()).is_null() ? QString("derived") : fromJsonText(m_spec["default"]));
  if (m_spec.contains("applies_when"))
    tip += "\nOnly used when " + QString::fromStdString(m_spec["applies_when"].value("text", std::string())) + ".";
  if (!m_spec.value("supported", true))
    tip = "Not available yet: " +
          QString::fromStdString(m_spec.value("unsupported_reason", std::string("not built yet"))) + "\n" + tip;
  return tip;
}

nlohmann::json FieldEditor::value() const {
  if (auto* spin = qobject_cast<QSpinBox*>(m_widget))
    return static_cast<int64_t>(spin->value());
  if (auto* box = qobject_cast<QCheckBox*>(m_widget))
    return box->isChecked();
  if (auto* combo = qobject_cast<QComboBox*>(m_widget))
    return combo->currentText().toStdString();
  if (auto* text = qobject_cast<QPlainTextEdit*>(m_widget)) {
    const std::string s = text->toPlainText().trimmed().toStdString();
    if (s.empty())
      return nlohmann::json::array();
    auto parsed = nlohmann::json::parse(s, nullptr, false);
    return parsed.is_discarded() ? nlohmann::json(s) : parsed;  // bad JSON: the validator says so
  }
  auto* line = qobject_cast<QLineEdit*>(m_widget);
  const QString text = line->text().trimmed();
  if (m_kind == "number") {
    if (text.isEmpty())
      return nlohmann::json();
    auto parsed = nlohmann::json::parse(text.toStdString(), nullptr, false);
    if (!parsed.is_discarded() && parsed.is_number())
      return parsed;
    return text.toStdString();  // not a number: reaches the validator as a wrong type
  }
  return line->text().toStdString();
}

void FieldEditor::setValue(const nlohmann::json& value) {
  if (auto* spin = qobject_cast<QSpinBox*>(m_widget)) {
    if (value.is_number()) {
      const double v = value.get<double>();
      spin->setValue(v < INT_MIN ? INT_MIN : v > INT_MAX ? INT_MAX : static_cast<int>(v));
    }
  } else if (auto* box = qobject_cast<QCheckBox*>(m_widget)) {
    box->setChecked(value.is_boolean() && value.get<bool>());
  } else if (auto* combo = qobject_cast<QComboBox*>(m_widget)) {
    const QString text = fromJsonText(value);
    int index = combo->findText(text);
    if (index < 0 && !text.isEmpty()) {  // keep an unknown value visible so the validator can mark it
      combo->addItem(text);
      index = combo->count() - 1;
    }
    if (index >= 0)
      combo->setCurrentIndex(index);
  } else if (auto* text = qobject_cast<QPlainTextEdit*>(m_widget)) {
    text->setPlainText(value.is_null() || (value.is_array() && value.empty()) ? QString()
                                                                              : QString::fromStdString(value.dump()));
  } else if (auto* line = qobject_cast<QLineEdit*>(m_widget)) {
    line->setText(fromJsonText(value));
  }
}

void FieldEditor::setError(const QString& message) {
  m_error = message;
  m_widget->setProperty("fieldError", !message.isEmpty());
  m_widget->setStyleSheet(message.isEmpty() ? QString() : QString("background: #fde8e8; border: 1px solid #c62828;"));
  m_widget->setToolTip(message.isEmpty() ? baseToolTip() : message + "\n\n" + baseToolTip());
}

void FieldEditor::onEdited(QObject* context, std::function<void()> fn) {
  if (auto* spin = qobject_cast<QSpinBox*>(m_widget))
    QObject::connect(spin, &QSpinBox::valueChanged, context, [fn](int) { fn(); });
  else if (auto* box = qobject_cast<QCheckBox*>(m_widget))
    QObject::connect(box, &QCheckBox::toggled, context, [fn](bool) { fn(); });
  else if (auto* combo = qobject_cast<QComboBox*>(m_widget))
    QObject::connect(combo, &QComboBox::currentTextChanged, context, [fn](const QString&) { fn(); });
  else if (auto* text = qobject_cast<QPlainTextEdit*>(m_widget))
    QObject::connect(text, &QPlainTextEdit::textChanged, context, [fn]() { fn(); });
  else if (auto* line = qobject_cast<QLineEdit*>(m_widget))
    QObject::connect(line, &QLineEdit::textEdited, context, [fn](const QString&) { fn(); });
}

}  // namespace lathe::ui
