// RunProgress: a progress bar with the phase and the ETA of the whole pipeline for the watched run,
// computed from what the store tail delivers: the phase plan and total_steps (every phase's planned
// steps) from the run's "started" event, the current phase from its "phase" events, the highest step
// and wall time seen in any of its samples, the run's status from its row. The ETA weighs each phase
// by the plan's estimate of its work (est_steps, est_seconds), so it stays above 0 during the
// phases that advance no step (prune, calibrate, benchmark).
#pragma once

#include <QLabel>
#include <QProgressBar>
#include <QWidget>
#include <optional>
#include <utility>
#include <vector>

#include "widgets/ui/store_tailer.h"

namespace lathe::ui {

class RunProgress : public QWidget {
  Q_OBJECT
 public:
  explicit RunProgress(QWidget* parent = nullptr);
  void applyBatch(const TailBatch& batch);
  int64_t step() const { return m_step; }
  /// Planned steps of the whole pipeline (never below the steps done).
  int64_t totalSteps() const { return std::max(m_total, m_step); }
  /// The phase the run is in (train, distill, teacher, prune, finetune, calibrate, qat, benchmark); "" before one.
  QString phase() const { return m_phase; }
  std::optional<double> etaSeconds() const;
  QString text() const { return m_label->text(); }
  QString barText() const { return m_bar->format(); }
  int barValue() const { return m_bar->value(); }  ///< 0..1000

 private:
  void update();
  QProgressBar* m_bar;
  QLabel* m_label;
  QString m_runId, m_status, m_phase;
  struct PlanEntry {
    QString name;
    int64_t steps = 0;
    double estSteps = 0, estSeconds = 0;  ///< phase_plan.h: work beyond the steps, fixed time
  };
  std::vector<PlanEntry> m_plan;
  int m_phaseIndex = -1;         ///< index into m_plan of the current phase
  int64_t m_phaseFirstStep = 0;  ///< the step the current phase started from
  int64_t m_step = 0, m_total = 0;
  double m_wallMs = 0;
};

}  // namespace lathe::ui
