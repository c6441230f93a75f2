// SweepDialog: asks for one or two knobs (schema paths, with completion) and their values, checks
// every value at its field against the schema as the run would apply it (a bad value is marked with
// the form allowed, and OK stays disabled), shows how many runs that makes, and returns the sweep
// axes (expanded by expand_sweep()). "Run on" picks this machine (the runs are queued) or a Slurm
// cluster: then the shared output folder and the resources per run (partition, time limit, GPUs,
// CPUs) are asked for and checked with check_slurm_resources (the CLI's own checks), the error
// naming the field; OK stays disabled until they are accepted.
#pragma once

#include <QComboBox>
#include <QDialog>
#include <QGroupBox>
#include <QSpinBox>
#include <QDialogButtonBox>
#include <QLabel>
#include <QLineEdit>
#include <nlohmann/json.hpp>
#include <vector>

#include "widgets/ui/sweep.h"

namespace lathe::ui {

class SweepDialog : public QDialog {
  Q_OBJECT
 public:
  /// `base`: the designer's config the sweep values are applied to (null: only the schema is checked).
  explicit SweepDialog(const nlohmann::json& base = nullptr, QWidget* parent = nullptr);
  std::vector<SweepAxis> axes() const;
  void setAxes(const std::vector<SweepAxis>& axes);
  /// The message shown under the values of knob 1 or 2 ("" when they are all accepted).
  QString valueError(int axis) const;
  bool acceptable() const;
  QLabel* countLabel() const { return m_count; }

  /// true: submit to Slurm (lathe-cli sweep --slurm); false: queue the runs here.
  bool onSlurm() const;
  void setOnSlurm(bool slurm);
  /// The Slurm fields as typed, the folder made absolute ("" stays "").
  SlurmResources slurmResources() const;
  void setSlurmResources(const SlurmResources& r);
  /// Why the Slurm fields are refused ("" when accepted or when running here).
  QString slurmError() const;

 private:
  void updateCount();
  QComboBox* m_target;
  QGroupBox* m_slurmBox;
  QLineEdit *m_out, *m_partition, *m_time;
  QSpinBox *m_gpus, *m_cpus;
  QLabel *m_slurmError, *m_slurmNote;
  nlohmann::json m_base;
  QComboBox *m_knob1, *m_knob2;
  QLineEdit *m_values1, *m_values2;
  QLabel *m_error1, *m_error2, *m_count;
  QDialogButtonBox* m_buttons;
};

}  // namespace lathe::ui
