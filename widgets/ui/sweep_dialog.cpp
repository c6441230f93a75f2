// SweepDialog (see sweep_dialog.h).
#include "widgets/ui/sweep_dialog.h"

#include <QFormLayout>
#include <QPushButton>

#include "engine/core/error.h"
#include "engine/run/config.h"
#include "engine/run/config_schema.h"

namespace lathe::ui {

SweepDialog::SweepDialog(const nlohmann::json& base, QWidget* parent) : QDialog(parent), m_base(base) {
  setWindowTitle("Queue a sweep");
  if (m_base.is_null()) {
    try {
      m_base = validate_config(nlohmann::json::object());
    } catch (const Error&) {
      m_base = nlohmann::json::object();
    }
  }
  auto* form = new QFormLayout(this);
  QStringList knobs{""};
  for (const FieldSpec& f : experiment_schema())
    if (f.kind != FieldSpec::Kind::object_list)
      knobs << QString::fromStdString(f.path);
  m_knob1 = new QComboBox(this);
  m_knob2 = new QComboBox(this);
  m_knob1->setObjectName("sweepKnob1");
  m_knob2->setObjectName("sweepKnob2");
  for (QComboBox* box : {m_knob1, m_knob2}) {
    box->setEditable(true);
    box->addItems(knobs);
  }
  m_values1 = new QLineEdit(this);
  m_values2 = new QLineEdit(this);
  m_values1->setObjectName("sweepValues1");
  m_values2->setObjectName("sweepValues2");
  m_values1->setPlaceholderText("e.g. 0.3, 0.5, 0.7, 0.9");
  m_values2->setPlaceholderText("e.g. minmax, entropy (optional)");
  m_error1 = new QLabel(this);
  m_error2 = new QLabel(this);
  for (QLabel* l : {m_error1, m_error2}) {
    l->setWordWrap(true);
    l->setStyleSheet("color: #b00020;");
    l->hide();
  }
  m_count = new QLabel(this);
  m_count->setObjectName("sweepCount");
  m_count->setWordWrap(true);
  form->addRow("Knob 1", m_knob1);
  form->addRow("Values", m_values1);
  form->addRow("", m_error1);
  form->addRow("Knob 2", m_knob2);
  form->addRow("Values", m_values2);
  form->addRow("", m_error2);
  form->addRow(m_count);
  m_buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  form->addRow(m_buttons);
  connect(m_buttons, &QDialogButtonBox::accepted, this, [this]() {
    if (acceptable())
      accept();
  });
  connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  for (QLineEdit* e : {m_values1, m_values2})
    connect(e, &QLineEdit::textChanged, this, &SweepDialog::updateCount);
  for (QComboBox* b : {m_knob1, m_knob2})
    connect(b, &QComboBox::currentTextChanged, this, &SweepDialog::updateCount);
  updateCount();
}

std::vector<SweepAxis> SweepDialog::axes() const {
  return {{m_knob1->currentText().trimmed().toStdString(), split_values(m_values1->text().toStdString())},
          {m_knob2->currentText().trimmed().toStdString(), split_values(m_values2->text().toStdString())}};
}

void SweepDialog::setAxes(const std::vector<SweepAxis>& axes) {
  QComboBox* knobs[] = {m_knob1, m_knob2};
  QLineEdit* values[] = {m_values1, m_values2};
  for (size_t i = 0; i < axes.size() && i < 2; ++i) {
    knobs[i]->setCurrentText(QString::fromStdString(axes[i].knob));
    QStringList v;
    for (const auto& s : axes[i].values)
      v << QString::fromStdString(s);
    values[i]->setText(v.join(", "));
  }
}

QString SweepDialog::valueError(int axis) const { return (axis == 1 ? m_error1 : m_error2)->text(); }

bool SweepDialog::acceptable() const { return m_buttons->button(QDialogButtonBox::Ok)->isEnabled(); }

void SweepDialog::updateCount() {
  bool ok = true;
  const std::vector<SweepAxis> all = axes();
  QLineEdit* edits[] = {m_values1, m_values2};
  QLabel* errors[] = {m_error1, m_error2};
  for (size_t i = 0; i < 2; ++i) {
    QString text;
    if (!all[i].knob.empty() && find_field(all[i].knob))
      for (const std::string& v : all[i].values) {
        const std::string problem = check_sweep_value(m_base, all[i].knob, v);
        if (!problem.empty())
          text += (text.isEmpty() ? "" : "\n") + QString::fromStdString(problem);
      }
    errors[i]->setText(text);
    errors[i]->setVisible(!text.isEmpty());
    edits[i]->setStyleSheet(text.isEmpty() ? QString() : QString("border: 1px solid #b00020;"));
    edits[i]->setToolTip(text);
    ok = ok && text.isEmpty();
  }
  try {
    const auto runs = expand_sweep(all);
    ok = ok && !runs.empty();
    m_count->setText(runs.empty() ? QString("Pick a knob and its values.")
                     : ok         ? QString("%1 runs will be queued.").arg(runs.size())
                          : QString("Fix the values marked in red: %1 runs once they are accepted.").arg(runs.size()));
  } catch (const Error& e) {
    ok = false;
    m_count->setText(QString::fromUtf8(e.what()));
  }
  m_buttons->button(QDialogButtonBox::Ok)->setEnabled(ok);
}

}  // namespace lathe::ui
