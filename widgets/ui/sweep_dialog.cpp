// SweepDialog (see sweep_dialog.h).
#include "widgets/ui/sweep_dialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>

#include "engine/core/error.h"
#include "engine/run/config_schema.h"

namespace lathe::ui {

SweepDialog::SweepDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle("Queue a sweep");
  auto* form = new QFormLayout(this);
  QStringList knobs{""};
  for (const FieldSpec& f : experiment_schema())
    if (f.kind != FieldSpec::Kind::object_list)
      knobs << QString::fromStdString(f.path);
  m_knob1 = new QComboBox(this);
  m_knob2 = new QComboBox(this);
  for (QComboBox* box : {m_knob1, m_knob2}) {
    box->setEditable(true);
    box->addItems(knobs);
  }
  m_values1 = new QLineEdit(this);
  m_values2 = new QLineEdit(this);
  m_values1->setPlaceholderText("e.g. 0.3, 0.5, 0.7, 0.9");
  m_values2->setPlaceholderText("e.g. minmax, entropy (optional)");
  m_count = new QLabel(this);
  form->addRow("Knob 1", m_knob1);
  form->addRow("Values", m_values1);
  form->addRow("Knob 2", m_knob2);
  form->addRow("Values", m_values2);
  form->addRow(m_count);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
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

void SweepDialog::updateCount() {
  try {
    const auto runs = expand_sweep(axes());
    m_count->setText(runs.empty() ? QString("Pick a knob and its values.") : QString("%1 runs will be queued.").arg(runs.size()));
  } catch (const Error& e) {
    m_count->setText(QString::fromUtf8(e.what()));
  }
}

}  // namespace lathe::ui
