// SweepDialog: asks for one or two knobs (schema paths, with completion) and their values, shows
// how many runs that makes, and returns the sweep axes (expanded by expand_sweep()).
#pragma once

#include <QComboBox>
#include <QDialog>
#include <QLabel>
#include <QLineEdit>
#include <vector>

#include "widgets/ui/sweep.h"

namespace lathe::ui {

class SweepDialog : public QDialog {
  Q_OBJECT
 public:
  explicit SweepDialog(QWidget* parent = nullptr);
  std::vector<SweepAxis> axes() const;
  void setAxes(const std::vector<SweepAxis>& axes);

 private:
  void updateCount();
  QComboBox *m_knob1, *m_knob2;
  QLineEdit *m_values1, *m_values2;
  QLabel* m_count;
};

}  // namespace lathe::ui
