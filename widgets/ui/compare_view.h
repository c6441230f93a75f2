// CompareView: 2-100 runs side by side. Tabs: Config (every flattened key per run, "only
// differences" hides equal rows), Metrics (last / best / min / max per run), Curves (one metric
// overlaid for every run), Scatter (any metric against any other, last or best value, with the
// Pareto front drawn), Groups (the runs folded by config without seed: mean ± std, GroupPanel),
// What matters (knob importance for a metric, ImportancePanel). Curves take the step, the epoch (each
// run by its own steps per epoch) or any metric as the x axis; Curves and Scatter have log axes,
// auto / fixed y and PNG / SVG export on their right-click menu (PlotOptions).
// Data comes from load_compare_data() on a worker thread.
#pragma once

#include <qcustomplot.h>
#include <QCheckBox>
#include <QComboBox>
#include <QFutureWatcher>
#include <QLabel>
#include <QTabWidget>
#include <QTableWidget>
#include <QWidget>

#include "widgets/ui/compare_data.h"
#include "widgets/ui/group_panel.h"
#include "widgets/ui/importance_panel.h"
#include "widgets/ui/plot_options.h"
#include "widgets/ui/series_math.h"

namespace lathe::ui {

class CompareView : public QWidget {
  Q_OBJECT
 public:
  explicit CompareView(QString dbPath, QWidget* parent = nullptr);

  /// Loads the runs asynchronously; `loaded` follows.
  void setRuns(const QStringList& runIds);
  /// Shows already loaded data (tests, and what setRuns ends in).
  void showData(CompareData data);
  const CompareData& data() const { return m_data; }
  QStringList runIds() const { return m_ids; }

  QTableWidget* configTable() const { return m_config; }
  /// The Metrics tab: columns metric, unit (default_unit), stat, then one per run from
  /// kFirstRunColumn; four rows (last, best, min, max) a metric.
  QTableWidget* metricTable() const { return m_metrics; }
  static constexpr int kFirstRunColumn = 3;
  QCheckBox* onlyDifferences() const { return m_onlyDiff; }
  QCustomPlot* curvePlot() const { return m_curves; }
  QCustomPlot* scatterPlot() const { return m_scatter; }
  QTabWidget* tabs() const { return m_tabs; }
  GroupPanel* groupPanel() const { return m_groupPanel; }
  ImportancePanel* importancePanel() const { return m_importancePanel; }
  /// "config", "metrics", "curves", "scatter", "groups" or "what matters".
  void showPage(const QString& name);
  void setCurveMetric(const QString& metric);
  /// "step" or any metric: the Curves tab's x axis (samples paired by step, pairByStep).
  void setCurveX(const QString& xMetric);
  void setCurveOptions(const PlotOptions& options);
  void setScatterOptions(const PlotOptions& options);
  const PlotOptions& curveOptions() const { return m_curveOptions; }
  const PlotOptions& scatterOptions() const { return m_scatterOptions; }
  /// Points the current Curves / Scatter drawing left out for a log axis.
  int curveHiddenPoints() const { return m_curveHidden; }
  int scatterHiddenPoints() const { return m_scatterHidden; }
  /// The right-click menu of curvePlot() or scatterPlot() (PlotOptions); the caller owns it.
  QMenu* buildPlotMenu(QCustomPlot* plot);
  void setScatterAxes(const QString& xMetric, const QString& yMetric);
  /// Run indices on the Pareto front of the current scatter, by x.
  std::vector<int> paretoRuns() const { return m_front; }
  /// The tooltip of the scatter point nearest to `pixel` (within 12 px): the run and both values;
  /// "" when no point is that close. Shown as the mouse moves over the scatter.
  QString scatterTooltipAt(const QPointF& pixel) const;

 signals:
  void loaded(const QString& error);

 private:
  void fillConfig();
  void fillMetrics();
  void drawCurves();
  void drawScatter();
  QString runLabel(size_t i) const;

  QString m_db;
  QStringList m_ids;
  CompareData m_data;
  QFutureWatcher<CompareData> m_watcher;
  QTabWidget* m_tabs;
  QLabel* m_header;
  QTableWidget *m_config, *m_metrics;
  QCheckBox* m_onlyDiff;
  QComboBox *m_curveMetric, *m_curveX, *m_scatterX, *m_scatterY, *m_scatterStat;
  QCheckBox *m_lowerX, *m_lowerY;
  QCustomPlot *m_curves, *m_scatter;
  GroupPanel* m_groupPanel;
  ImportancePanel* m_importancePanel;
  std::vector<int> m_front;
  PlotOptions m_curveOptions, m_scatterOptions;
  int m_curveHidden = 0, m_scatterHidden = 0;
  std::vector<std::pair<int, XY>> m_scatterPoints;  ///< run index, (x, y) of each drawn point
};

}  // namespace lathe::ui
