// ExperimentForm: the schema-generated designer form (see experiment_form.h).
#include "widgets/ui/experiment_form.h"

#include "engine/run/cost_model.h"

#include <QFormLayout>
#include <QGroupBox>
#include <QScrollArea>
#include <QVBoxLayout>

#include "engine/core/error.h"
#include "engine/run/config.h"
#include "engine/run/config_schema.h"
#include "widgets/ui/sweep.h"

namespace lathe::ui {
namespace {

nlohmann::json::json_pointer pointer_of(const std::string& dotted) {
  std::string p;
  size_t start = 0;
  while (start <= dotted.size()) {
    const size_t dot = dotted.find('.', start);
    p += "/" + dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  return nlohmann::json::json_pointer(p);
}

QString titleOf(const QString& section) {
  return section.isEmpty() ? QString("Other") : section.left(1).toUpper() + section.mid(1);
}

}  // namespace

ExperimentForm::ExperimentForm(QWidget* parent) : QWidget(parent) {
  build();
  applyDependencies();
  m_validateTimer.setSingleShot(true);
  m_validateTimer.setInterval(250);
  connect(&m_validateTimer, &QTimer::timeout, this, [this]() { validate(); });
}

ExperimentForm::~ExperimentForm() = default;

void ExperimentForm::build() {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  m_errorBox = new QLabel(this);
  m_errorBox->setObjectName("formErrors");
  m_errorBox->setWordWrap(true);
  m_errorBox->setStyleSheet("color: #b71c1c;");
  m_errorBox->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_errorBox->hide();
  outer->addWidget(m_errorBox);

  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  auto* body = new QWidget(scroll);
  auto* column = new QVBoxLayout(body);
  QMap<QString, QFormLayout*> groups;
  const nlohmann::json schema = schema_as_json();
  for (const auto& field : schema.at("fields")) {
    const QString section = QString::fromStdString(field.value("section", std::string()));
    if (!groups.contains(section)) {
      auto* box = new QGroupBox(titleOf(section), body);
      box->setObjectName("section:" + section);
      auto* form = new QFormLayout(box);
      form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
      groups[section] = form;
      m_sections << section;
      column->addWidget(box);
    }
    nlohmann::json spec = field;
    if (spec.value("path", std::string()) == "cost.instance") {  // the catalog's names, not free text
      try {
        const PriceCatalog catalog = PriceCatalog::load(PriceCatalog::default_path());
        spec["suggestions"] = catalog.names();
        for (const InstancePrice& p : catalog.instances())
          if (p.gpus > 0)
            m_gpuInstances[QString::fromStdString(p.name)] = p.gpus;
      } catch (const Error&) {
        // no catalog: free text, and validate() names the problem
      }
    }
    auto editor = std::make_unique<FieldEditor>(spec, body);
    QString label = editor->path();
    if (label.startsWith(section + "."))
      label = label.mid(section.size() + 1);
    auto* labelWidget = new QLabel(label, body);
    labelWidget->setToolTip(editor->baseToolTip());
    if (!field.value("supported", true))
      labelWidget->setEnabled(false);
    groups[section]->addRow(labelWidget, editor->widget());
    editor->onEdited(this, [this]() {
      if (m_loading)
        return;
      applyDependencies();
      emit edited();
      m_validateTimer.start();
    });
    m_labels[editor->path()] = labelWidget;
    m_byPath[editor->path()] = editor.get();
    m_fields.push_back(std::move(editor));
  }
  column->addStretch(1);
  scroll->setWidget(body);
  outer->addWidget(scroll, 1);
}

void ExperimentForm::setConfig(const nlohmann::json& cfg) {
  m_loading = true;
  m_base = cfg.is_object() ? cfg : nlohmann::json::object();
  for (auto& f : m_fields) {
    const auto ptr = pointer_of(f->path().toStdString());
    f->setValue(m_base.contains(ptr) ? m_base.at(ptr) : f->spec().value("default", nlohmann::json()));
  }
  const auto zoo = pointer_of("model.zoo"), onnx = pointer_of("model.onnx");
  if (FieldEditor* z = field("model.zoo"); z && !m_base.contains(zoo) && m_base.contains(onnx) &&
                                           m_base.at(onnx).is_string() && !m_base.at(onnx).get<std::string>().empty())
    z->setValue("onnx");  // implied, as validate_config reads it
  m_loading = false;
  clearErrors();  // before applyDependencies: it resets the tooltips, which then say what is not used now
  applyDependencies();
  m_validateTimer.start();
}

nlohmann::json ExperimentForm::shownValues() const {
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& f : m_fields)
    doc[pointer_of(f->path().toStdString())] = f->value();
  return doc;
}

bool ExperimentForm::applies(const QString& path) const { return applies(path, shownValues()); }

bool ExperimentForm::applies(const QString& path, const nlohmann::json& shown) const {
  const FieldSpec* spec = find_field(path.toStdString());
  return !spec || field_applies(*spec, shown);
}

QString ExperimentForm::note(const QString& path) const { return m_notes.value(path); }

void ExperimentForm::applyDependencies() {
  // A GPU instance priced for a CPU run: allowed (a CPU run on a GPU box), but worth a note.
  if (FieldEditor* inst = field("cost.instance")) {
    const FieldEditor* backend = field("compute.backend");
    const QString name = QString::fromStdString(inst->value().get<std::string>());
    const bool cpu = backend && backend->value() == nlohmann::json("cpu");
    QString text;
    if (cpu && m_gpuInstances.contains(name))
      text = QString("Note: %1 has %2 GPU(s), and this run uses the CPU only: the price counts GPUs that stay idle.")
                 .arg(name)
                 .arg(m_gpuInstances.value(name));
    m_notes["cost.instance"] = text;
    if (inst->error().isEmpty()) {
      inst->widget()->setStyleSheet(text.isEmpty() ? QString() : QString("border: 1px solid #e0a800;"));
      inst->widget()->setToolTip(text.isEmpty() ? inst->baseToolTip() : text + "\n\n" + inst->baseToolTip());
    }
  }
  const nlohmann::json shown = shownValues();
  for (auto& f : m_fields) {
    const FieldSpec* spec = find_field(f->path().toStdString());
    if (!spec || spec->applies_when.empty() || !spec->supported)
      continue;
    const bool on = field_applies(*spec, shown);
    f->widget()->setEnabled(on);
    m_labels[f->path()]->setEnabled(on);
    if (!f->error().isEmpty())
      continue;  // the error leads the tooltip (FieldEditor::setError)
    f->widget()->setToolTip(on ? f->baseToolTip()
                               : "Not used now: " + QString::fromStdString(why_not_applies(*spec, shown)) + ".\n\n" +
                                     f->baseToolTip());
    m_labels[f->path()]->setToolTip(f->widget()->toolTip());  // the greyed name says why too
  }
}

nlohmann::json ExperimentForm::config() const {
  nlohmann::json out = m_base;
  const nlohmann::json shown = shownValues();
  for (const auto& f : m_fields) {
    const auto ptr = pointer_of(f->path().toStdString());
    const nlohmann::json v = f->value();
    const nlohmann::json def = f->spec().value("default", nlohmann::json());
    if (out.contains(ptr) || (v != def && applies(f->path(), shown)))
      out[ptr] = v;
  }
  // {"model": {"onnx": file}} alone means model.zoo "onnx" (validate_config); setConfig showed it,
  // and it stays implied rather than written.
  const auto zoo = pointer_of("model.zoo"), onnx = pointer_of("model.onnx");
  if (!m_base.contains(zoo) && out.contains(zoo) && out[zoo] == "onnx" && out.contains(onnx) && out[onnx].is_string() &&
      !out[onnx].get<std::string>().empty())
    out["model"].erase("zoo");
  return out;
}

void ExperimentForm::clearErrors() {
  for (auto& f : m_fields)
    f->setError({});
  for (QLabel* l : m_labels)
    l->setStyleSheet({});
  m_errors.clear();
  m_errorBox->hide();
}

nlohmann::json ExperimentForm::validate() {
  m_validateTimer.stop();
  clearErrors();
  applyDependencies();
  try {
    nlohmann::json valid = validate_config(config());
    emit validated(true, {});
    return valid;
  } catch (const Error& e) {
    QStringList unmapped;
    for (const FieldMessage& m : split_config_errors(e.what())) {
      const QString line = QString::fromStdString(m.message);
      m_errors << line;
      FieldEditor* f = m_byPath.value(QString::fromStdString(m.path), nullptr);
      if (f) {
        f->setError(f->error().isEmpty() ? line : f->error() + "\n" + line);
        m_labels[f->path()]->setStyleSheet("color: #b71c1c; font-weight: bold;");
      }
    }
    m_errorBox->setText("This config will not run; fix the marked fields:\n" + m_errors.join("\n"));
    m_errorBox->show();
    emit validated(false, m_errors.join("\n"));
    return nlohmann::json();
  }
}

QStringList ExperimentForm::fieldPaths() const {
  QStringList out;
  for (const auto& f : m_fields)
    out << f->path();
  return out;
}

FieldEditor* ExperimentForm::field(const QString& path) const { return m_byPath.value(path, nullptr); }

}  // namespace lathe::ui
