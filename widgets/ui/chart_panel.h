// ChartPanel: the live view of one run. Six LiveCharts (loss, accuracy, samples/s, device
// utilisation + MFU, memory, $ spent), an x-axis chooser (step / epoch / wall time / $) and an EMA
// slider. "Add chart" adds a chart of any other metric the run has logged (sparsity per layer,
// quant search points, loss scale, ...); the charts added are remembered per preset (QSettings
// "liveCharts/<preset>", the preset being the run's name without its sweep knob=value tokens) and
// come back for the next run of it. Batches from the store tail are appended as they come; a 33 ms
// coalescing timer replots up to two changed charts per tick, so a flood of samples never costs
// more than that. Spot notices, interruptions and resumes of the run are marked on every chart
// (markerFor) at their step, in red; the start of a prune, finetune or qat stage in grey. The x axis can also be any
// metric the run has logged (accuracy against cost/usd); "Log x" / "Log y" set every chart's axes, and each chart's
// right-click menu holds its own options and PNG / SVG export (PlotOptions). A failed run's error (its status event)
// shows in red under the title; the Cost chart of an instance with no price ("local") says why it
// stays at $0; once the run has ended, a metric it never logged reads "(not logged by this run)".
#pragma once

#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QLabel>
#include <QSlider>
#include <QTimer>
#include <QToolButton>
#include <QWidget>
#include <map>
#include <optional>
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
  /// Any metric of the run as every chart's x axis (its samples paired with each curve's by step).
  void setXMetric(const QString& metric);
  /// What the x axis chooser offers: the four modes, then every metric the run has logged.
  QStringList xAxisChoices() const;
  /// Log x / log y on every chart (the toolbar's check boxes).
  void setLogAxes(bool logX, bool logY);
  void setSmoothing(double alpha);
  QString runId() const { return m_runId; }
  /// The watched run's error ("" unless it failed with one): shown under the title.
  QString errorText() const { return m_error->isHidden() ? QString() : m_error->text(); }
  /// Replots every changed chart now.
  void refreshNow();
  /// Replots at most `maxCharts` changed charts, round-robin (what the 33 ms timer does).
  void refreshSome(int maxCharts);
  /// Replots completed since construction.
  int64_t replots() const { return m_replots; }

  /// Metrics the watched run has logged that no chart shows yet (what "Add chart" offers), sorted.
  QStringList addableMetrics() const;
  /// Adds a chart of `metric` with the points seen so far, and remembers it for the run's preset.
  LiveChart* addChart(const QString& metric);
  /// Removes a chart added with addChart (and forgets it for the preset); false if there is none.
  bool removeChart(const QString& metric);
  /// The metrics of the added charts, in order.
  QStringList addedMetrics() const;
  /// The preset the added charts are remembered for ("" before a run).
  QString preset() const { return m_preset; }
  /// The preset of a run name: without its sweep tokens ("mlp-fashion lr=0.02" -> "mlp-fashion").
  static QString presetOf(const QString& runName);
  struct MarkerSpec {
    int64_t step = 0;
    double wallMs = -1;  ///< < 0: unknown (the chart takes the sample's time at that step)
    QString label;
    QColor color = QColor(200, 60, 40);  ///< red: spot and device events; grey: a stage starting
  };
  /// The charts of a data-parallel run, made when its first dist/rank<i>/samples_per_s arrive and
  /// dropped with the run: "Samples / s per rank" (one line per rank) and "Communication and rank
  /// utilisation" (dist/comm_fraction and each dist/rank<i>/util). Empty for a one-process run.
  const std::vector<LiveChart*>& rankCharts() const { return m_rankCharts; }
  /// The marker an event asks for (spot/notice, spot/interruption, resumed, device/warning; a
  /// phase event of the prune, finetune or qat stage after the first step: where it starts), if any.
  static std::optional<MarkerSpec> markerFor(const EventRecord& e);

 private:
  void applyMapping();
  LiveChart* makeAddedChart(const QString& metric);
  void rememberAdded() const;
  void layoutCharts();
  void ensureRankCharts(const TailBatch& batch);
  void dropRankCharts();
  /// A chart made after the run started: the current mapping, x metric, smoothing, log axes, markers.
  void prepareLateChart(LiveChart* chart);
  std::vector<Point> xMetricPoints() const;
  void noteMetric(const std::string& metric);
  std::vector<LiveChart*> m_charts;
  size_t m_fixedCharts = 0;  ///< the first charts are the six built in (and the rank charts); the rest were added
  std::vector<LiveChart*> m_rankCharts;  ///< right after the six built in, counted in m_fixedCharts
  std::map<std::string, std::vector<Point>> m_unshown;
  std::vector<MarkerSpec> m_markers;  ///< every marker of the run (an added chart gets them too)  ///< every point of
                                      ///< the metrics no chart shows
  QString m_preset;
  QGridLayout* m_grid = nullptr;
  QToolButton* m_addButton = nullptr;
  QComboBox* m_xMode = nullptr;
  QCheckBox *m_logX = nullptr, *m_logY = nullptr;
  QSlider* m_smooth = nullptr;
  QLabel* m_smoothLabel = nullptr;
  QLabel* m_title = nullptr;
  QLabel* m_error = nullptr;
  QTimer m_replotTimer;
  XMapping m_map;
  double m_epochs = 0, m_totalSteps = 0;
  QString m_runId;
  int64_t m_replots = 0;
  int m_nextChart = 0;
};

}  // namespace lathe::ui
