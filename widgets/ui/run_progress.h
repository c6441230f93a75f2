// RunProgress: a progress bar with ETA for the watched run, computed from what the store tail
// delivers: total_steps from the run's "started" event, the highest step and wall time seen in
// its samples, the run's status from its row.
#pragma once

#include <QLabel>
#include <QProgressBar>
#include <QWidget>
#include <optional>

#include "widgets/ui/store_tailer.h"

namespace lathe::ui {

class RunProgress : public QWidget {
  Q_OBJECT
 public:
  explicit RunProgress(QWidget* parent = nullptr);
  void applyBatch(const TailBatch& batch);
  int64_t step() const { return m_step; }
  int64_t totalSteps() const { return m_total; }
  std::optional<double> etaSeconds() const;
  QString text() const { return m_label->text(); }

 private:
  void update();
  QProgressBar* m_bar;
  QLabel* m_label;
  QString m_runId, m_status;
  int64_t m_step = 0, m_total = 0;
  double m_wallMs = 0;
};

}  // namespace lathe::ui
