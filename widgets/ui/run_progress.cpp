// RunProgress (see run_progress.h).
#include "widgets/ui/run_progress.h"

#include <QHBoxLayout>
#include <algorithm>

#include "widgets/ui/series_math.h"

namespace lathe::ui {

RunProgress::RunProgress(QWidget* parent) : QWidget(parent) {
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(0, 0, 0, 0);
  m_bar = new QProgressBar(this);
  m_bar->setObjectName("runProgress");
  m_bar->setRange(0, 1000);
  m_bar->setValue(0);
  m_bar->setMaximumWidth(240);
  m_bar->setTextVisible(true);
  m_label = new QLabel("no active run", this);
  m_label->setObjectName("runEta");
  row->addWidget(m_bar);
  row->addWidget(m_label);
}

std::optional<double> RunProgress::etaSeconds() const {
  if (m_status != "running")
    return std::nullopt;
  if (m_phaseIndex < 0)
    return eta_seconds(m_step, totalSteps(), m_wallMs / 1000.0);
  // Work done: the phases before this one in full, this one's steps so far; the time per unit of
  // work from the wall time spent on it (less the fixed seconds of the phases done).
  double done = 0, rest = 0, fixed_done = 0, fixed_rest = 0;
  for (size_t j = 0; j < m_plan.size(); ++j) {
    const PlanEntry& e = m_plan[j];
    const double work = static_cast<double>(e.steps) + e.estSteps;
    if (static_cast<int>(j) < m_phaseIndex) {
      done += work;
      fixed_done += e.estSeconds;
    } else {
      rest += work;
      fixed_rest += e.estSeconds;
    }
  }
  const int64_t in_phase = std::clamp<int64_t>(m_step - m_phaseFirstStep, 0, m_plan[m_phaseIndex].steps);
  done += static_cast<double>(in_phase);
  rest -= static_cast<double>(in_phase);
  const double spent_s = m_wallMs / 1000.0 - fixed_done;
  if (done <= 0 || spent_s <= 0)
    return std::nullopt;
  return std::max(0.0, rest) * spent_s / done + fixed_rest;
}

void RunProgress::applyBatch(const TailBatch& batch) {
  if (batch.reset || batch.runId != m_runId) {
    m_runId = batch.runId;
    m_step = m_total = 0;
    m_wallMs = 0;
    m_phase.clear();
    m_plan.clear();
    m_phaseIndex = -1;
    m_phaseFirstStep = 0;
  }
  for (const EventRecord& e : batch.events) {
    if (e.kind == "started") {
      m_total = e.fields.value("total_steps", int64_t{0});
      m_plan.clear();
      if (e.fields.contains("plan") && e.fields["plan"].is_array())
        for (const auto& p : e.fields["plan"])
          m_plan.push_back({QString::fromStdString(p.value("phase", std::string())), p.value("steps", int64_t{0}),
                            p.value("est_steps", 0.0), p.value("est_seconds", 0.0)});
    } else if (e.kind == "phase") {
      m_phase = QString::fromStdString(e.fields.value("phase", std::string()));
      // The main training of a distillation run is planned as "distill" (its phase event says "train").
      const bool distilling =
          std::any_of(m_plan.begin(), m_plan.end(), [](const PlanEntry& p) { return p.name == "distill"; });
      if (m_phase == "train" && distilling)
        m_phase = "distill";
      // The plan's next entry of that name (a benchmark follows each compression stage).
      for (size_t i = static_cast<size_t>(std::max(0, m_phaseIndex)); i < m_plan.size(); ++i)
        if (m_plan[i].name == m_phase) {
          m_phaseIndex = static_cast<int>(i);
          m_phaseFirstStep = e.fields.value("first_step", m_step);
          break;
        }
    }
  }
  // Every phase advances the one global step: the teacher's, fine-tuning's and the stages' samples count.
  for (const auto& [metric, points] : batch.series)
    if (!points.empty() && points.back().step >= m_step) {
      m_step = points.back().step;
      m_wallMs = std::max(m_wallMs, points.back().wall_ms);
    }
  if (batch.run)
    m_status = QString::fromStdString(std::string(status_name(batch.run->status)));
  update();
}

void RunProgress::update() {
  const int64_t total = totalSteps();
  const bool done = m_status == "finished";
  const double fraction = total > 0 ? std::min(1.0, static_cast<double>(m_step) / static_cast<double>(total)) : 0;
  m_bar->setValue(done ? 1000 : static_cast<int>(fraction * 1000));
  const QString percent = QString("%1%").arg(fraction * 100, 0, 'f', 0);
  // A run that stopped short says so on the bar: "train 44%" there reads as a run still going.
  const bool stopped = !done && !m_status.isEmpty() && m_status != "running" && m_status != "queued";
  m_bar->setFormat(done                ? QString("done")
                   : stopped           ? m_status + " at " + percent
                   : m_phase.isEmpty() ? percent
                                       : m_phase + " " + percent);
  QString text = QString("%1: %2").arg(m_runId, m_status);
  if (!m_phase.isEmpty() && !done) {
    text += ", " + m_phase;
    if (m_phaseIndex >= 0 && m_plan[m_phaseIndex].name == m_phase)
      text += QString(" (phase %1 of %2)").arg(m_phaseIndex + 1).arg(m_plan.size());
  }
  text += QString(", step %1").arg(m_step);
  if (total > 0)
    text += QString(" of %1").arg(total);
  if (auto eta = etaSeconds())
    text += ", ETA " + QString::fromStdString(format_duration(*eta));
  m_label->setText(text);
  m_label->setToolTip(m_plan.empty() ? QString() : [this]() {
    QStringList parts;
    for (const PlanEntry& e : m_plan)
      parts << (e.steps > 0 ? QString("%1 (%2 steps)").arg(e.name).arg(e.steps) : e.name);
    return "Pipeline: " + parts.join(" -> ");
  }());
}

}  // namespace lathe::ui
