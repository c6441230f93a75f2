// RunProgress (see run_progress.h).
#include "widgets/ui/run_progress.h"

#include <QHBoxLayout>

#include "widgets/ui/series_math.h"

namespace lathe::ui {

RunProgress::RunProgress(QWidget* parent) : QWidget(parent) {
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(0, 0, 0, 0);
  m_bar = new QProgressBar(this);
  m_bar->setObjectName("runProgress");
  m_bar->setRange(0, 1000);
  m_bar->setValue(0);
  m_bar->setMaximumWidth(220);
  m_bar->setTextVisible(true);
  m_label = new QLabel("no active run", this);
  m_label->setObjectName("runEta");
  row->addWidget(m_bar);
  row->addWidget(m_label);
}

std::optional<double> RunProgress::etaSeconds() const {
  if (m_status != "running")
    return std::nullopt;
  return eta_seconds(m_step, m_total, m_wallMs / 1000.0);
}

void RunProgress::applyBatch(const TailBatch& batch) {
  if (batch.reset || batch.runId != m_runId) {
    m_runId = batch.runId;
    m_step = m_total = 0;
    m_wallMs = 0;
  }
  for (const EventRecord& e : batch.events)
    if (e.kind == "started")
      m_total = e.fields.value("total_steps", int64_t{0});
  for (const auto& [metric, points] : batch.series)
    if (!points.empty() && metric.rfind("train/", 0) == 0) {
      m_step = std::max(m_step, points.back().step);
      m_wallMs = std::max(m_wallMs, points.back().wall_ms);
    }
  if (batch.run)
    m_status = QString::fromStdString(std::string(status_name(batch.run->status)));
  update();
}

void RunProgress::update() {
  const double fraction = m_total > 0 ? std::min(1.0, static_cast<double>(m_step) / static_cast<double>(m_total)) : 0;
  m_bar->setValue(m_status == "finished" ? 1000 : static_cast<int>(fraction * 1000));
  m_bar->setFormat(m_status == "finished" ? QString("done") : QString("%1%").arg(fraction * 100, 0, 'f', 0));
  QString text = QString("%1: %2, step %3").arg(m_runId, m_status).arg(m_step);
  if (m_total > 0)
    text += QString(" of %1").arg(m_total);
  if (auto eta = etaSeconds())
    text += ", ETA " + QString::fromStdString(format_duration(*eta));
  m_label->setText(text);
}

}  // namespace lathe::ui
