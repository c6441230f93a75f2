// SweepDialog (see sweep_dialog.h).
#include "widgets/ui/sweep_dialog.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QPushButton>
#include <QStandardPaths>

#include "engine/core/error.h"
#include "engine/run/config.h"
#include "engine/run/config_schema.h"

namespace lathe::ui {

SweepDialog::SweepDialog(const nlohmann::json& base, QWidget* parent) : QDialog(parent), m_base(base) {
  setWindowTitle("Sweep");
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
  m_target = new QComboBox(this);
  m_target->setObjectName("sweepTarget");
  m_target->addItems({"this machine (queue the runs)", "Slurm cluster (one job array)"});
  m_target->setToolTip(
      "Slurm: lathe-cli sweep --slurm submits one task per run; each writes its own store in the shared folder, "
      "which the app then imports every 3 s");
  form->addRow("Run on", m_target);
  m_slurmBox = new QGroupBox("Slurm", this);
  m_slurmBox->setObjectName("slurmBox");
  auto* slurm = new QFormLayout(m_slurmBox);
  m_out = new QLineEdit(m_slurmBox);
  m_out->setObjectName("slurmOut");
  m_out->setPlaceholderText("a folder every node can write (shared file system)");
  auto* browse = new QPushButton("Browse...", m_slurmBox);
  connect(browse, &QPushButton::clicked, this, [this]() {
    const QString dir = QFileDialog::getExistingDirectory(this, "Shared output folder of the sweep", m_out->text());
    if (!dir.isEmpty())
      m_out->setText(dir);
  });
  auto* outRow = new QHBoxLayout;
  outRow->addWidget(m_out, 1);
  outRow->addWidget(browse);
  m_partition = new QLineEdit(m_slurmBox);
  m_partition->setObjectName("slurmPartition");
  m_partition->setPlaceholderText("the cluster's default");
  m_time = new QLineEdit(m_slurmBox);
  m_time->setObjectName("slurmTime");
  m_time->setPlaceholderText("the partition's default; e.g. 30, 45:00, 2:00:00, 1-12");
  m_gpus = new QSpinBox(m_slurmBox);
  m_gpus->setObjectName("slurmGpus");
  m_gpus->setRange(-1, kMaxSlurmGpus);
  m_gpus->setValue(-1);
  m_gpus->setSpecialValueText("from the config (compute.devices on cuda, else 0)");
  m_cpus = new QSpinBox(m_slurmBox);
  m_cpus->setObjectName("slurmCpus");
  m_cpus->setRange(-1, kMaxSlurmCpus);
  m_cpus->setValue(-1);
  m_cpus->setSpecialValueText("from the config (train.threads, else Slurm's default)");
  m_slurmError = new QLabel(m_slurmBox);
  m_slurmError->setObjectName("slurmError");
  m_slurmError->setWordWrap(true);
  m_slurmError->setStyleSheet("color: #b00020;");
  m_slurmNote = new QLabel(m_slurmBox);
  m_slurmNote->setWordWrap(true);
  slurm->addRow("Output folder", outRow);
  slurm->addRow("Partition", m_partition);
  slurm->addRow("Time limit", m_time);
  slurm->addRow("GPUs per run", m_gpus);
  slurm->addRow("CPUs per run", m_cpus);
  slurm->addRow(m_slurmError);
  slurm->addRow(m_slurmNote);
  m_slurmBox->setVisible(false);
  form->addRow(m_slurmBox);
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
  connect(m_target, &QComboBox::currentIndexChanged, this, [this]() {
    m_slurmBox->setVisible(onSlurm());
    updateCount();
  });
  for (QLineEdit* e : {m_out, m_partition, m_time})
    connect(e, &QLineEdit::textChanged, this, &SweepDialog::updateCount);
  for (QSpinBox* b : {m_gpus, m_cpus})
    connect(b, &QSpinBox::valueChanged, this, &SweepDialog::updateCount);
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

bool SweepDialog::onSlurm() const { return m_target->currentIndex() == 1; }

void SweepDialog::setOnSlurm(bool slurm) { m_target->setCurrentIndex(slurm ? 1 : 0); }

SlurmResources SweepDialog::slurmResources() const {
  SlurmResources r;
  const QString out = m_out->text().trimmed();
  r.out = out.isEmpty() ? std::string() : QDir::cleanPath(QFileInfo(out).absoluteFilePath()).toStdString();
  r.partition = m_partition->text().trimmed().toStdString();
  r.time = m_time->text().trimmed().toStdString();
  r.gpus = m_gpus->value();
  r.cpus = m_cpus->value();
  return r;
}

void SweepDialog::setSlurmResources(const SlurmResources& r) {
  m_out->setText(QString::fromStdString(r.out));
  m_partition->setText(QString::fromStdString(r.partition));
  m_time->setText(QString::fromStdString(r.time));
  m_gpus->setValue(r.gpus);
  m_cpus->setValue(r.cpus);
}

QString SweepDialog::slurmError() const { return m_slurmError->text(); }

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
  QString slurmText;
  if (onSlurm()) {
    try {
      check_slurm_resources(slurmResources());
    } catch (const Error& e) {
      slurmText = QString::fromUtf8(e.what());
    }
    m_slurmNote->setText(QStandardPaths::findExecutable("sbatch").isEmpty()
                             ? "sbatch is not on PATH: the submission will fail here; run the app on a machine with "
                               "Slurm's client commands (a login node, or apt-get install slurm-client)."
                             : QString());
  }
  m_slurmError->setText(slurmText);
  m_slurmError->setVisible(!slurmText.isEmpty());
  ok = ok && slurmText.isEmpty();
  try {
    const auto runs = expand_sweep(all);
    ok = ok && !runs.empty();
    const QString what = onSlurm() ? "submitted to Slurm as one job array" : "queued";
    m_count->setText(runs.empty() ? QString("Pick a knob and its values.")
                     : ok         ? QString("%1 runs will be %2.").arg(runs.size()).arg(what)
                     : !slurmText.isEmpty()
                         ? QString("Fix the Slurm field named in red: %1 runs once it is accepted.").arg(runs.size())
                         : QString("Fix the values marked in red: %1 runs once they are accepted.").arg(runs.size()));
  } catch (const Error& e) {
    ok = false;
    m_count->setText(QString::fromUtf8(e.what()));
  }
  m_buttons->button(QDialogButtonBox::Ok)->setEnabled(ok);
}

}  // namespace lathe::ui
