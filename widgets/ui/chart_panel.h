// ChartPanel: the live view of one run. Six LiveCharts (loss, accuracy, samples/s, device
// utilisation + MFU, memory, $ spent), an x-axis chooser (step / epoch / wall time / $) and an EMA
// slider. Batches from the store tail are appended as they come; a 33 ms coalescing timer replots
// up to two changed charts per tick, so a flood of samples never costs more than that.
#pragma once

#include <QComboBox>
#include <QLabel>
#include <QSlider>
#include <QTimer>
#include <QWidget>
#include <vector>

#include "widgets/ui/live_chart.h"
#include "widgets/ui/store_tailer.h"

namespace lathe::ui {

class ChartPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ChartPanel(QWidget* parent = nullptr);

  void applyBatch(const TailBatch& batch);
  const std::vector<LiveChart*>& charts() const { return m_charts; }
  LiveChart* chartFor(const std::string& metric) const;
  void setXMode(XMapping::Mode mode);
  void setSmoothing(double alpha);
  QString runId() const { return m_runId; }
  /// Replots every changed chart now.
  void refreshNow();
  /// Replots at most `maxCharts` changed charts, round-robin (what the 33 ms timer does).
  void refreshSome(int maxCharts);
  /// Replots completed since construction.
  int64_t replots() const { return m_replots; }

 private:
  void applyMapping();
  std::vector<LiveChart*> m_charts;
  QComboBox* m_xMode = nullptr;
  QSlider* m_smooth = nullptr;
  QLabel* m_smoothLabel = nullptr;
  QLabel* m_title = nullptr;
  QTimer m_replotTimer;
  XMapping m_map;
  double m_epochs = 0, m_totalSteps = 0;
  QString m_runId;
  int64_t m_replots = 0;
  int m_nextChart = 0;
};

}  // namespace lathe::ui
