// GroupPanel: the compare view's Groups tab. The compared runs folded into groups by their config
// without seed (or the keys typed in "Group by"): a table with each group's n and every metric's
// last value as mean ± sample std (ddof = 1) (n), and a chart of one metric with each group's mean
// line and, by the switch, a mean ± std band or the min/max envelope; each member's own trace on
// demand. Group curves align the members' chart points by step (engine/analysis/group_series.h).
// The chart switches to a scatter of two metrics: one point per group at the means of the members'
// last values, with error bars of one sample std on both axes. Both charts have the Live and
// Compare charts' options (plot_options.h, on the right-click menu): log x / y, an auto or fixed y
// range, PNG / SVG export; the curves' x is the step or any metric ("x:"; each group's mean of y
// against its mean of x at the same step, pairByStep).
#pragma once

#include <qcustomplot.h>
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QTableWidget>
#include <QWidget>

#include "engine/analysis/run_groups.h"
#include "widgets/ui/compare_data.h"
#include "widgets/ui/plot_options.h"

namespace lathe::ui {

class GroupPanel : public QWidget {
  Q_OBJECT
 public:
  enum class Band { stdBand = 0, envelope = 1 };
  enum class View { curves = 0, scatter = 1 };
  explicit GroupPanel(QWidget* parent = nullptr);

  /// Groups `data` (kept by reference: the compare view owns it and calls this again when it changes).
  void setData(const CompareData* data);
  /// "" (the config without seed), "a,b" (those keys) or "-seed,-x" (without those): GroupBy::parse.
  void setGroupBy(const QString& text);
  void setMetric(const QString& metric);
  void setBand(Band band);
  void setShowMembers(bool on);
  void setView(View view);
  /// Scatter axes (metric names); switches the chart to the scatter.
  void setScatterAxes(const QString& xMetric, const QString& yMetric);
  /// The curves' x axis: "step" or a metric with a curve.
  void setCurveX(const QString& xMetric);
  /// Log axes, y range: applied to the chart now and kept for every redraw. Throws
  /// std::invalid_argument (applyPlotOptions) for a fixed range it cannot show, keeping the old.
  void setPlotOptions(const PlotOptions& options);
  const PlotOptions& plotOptions() const { return m_options; }
  /// Points left out because a log axis cannot show them (<= 0), as the chart's corner says.
  int hiddenPoints() const { return m_hidden; }
  /// The chart's right-click menu (plot options and export); the caller owns it.
  QMenu* buildPlotMenu();

  const std::vector<RunGroup>& groups() const { return m_groups; }
  QTableWidget* table() const { return m_table; }
  QCustomPlot* plot() const { return m_plot; }
  QLabel* note() const { return m_note; }
  QLineEdit* groupByEdit() const { return m_groupBy; }

 private:
  void regroup();
  void fillTable();
  void draw();
  void drawScatter();

  const CompareData* m_data = nullptr;
  std::vector<RunGroup> m_groups;
  QLineEdit* m_groupBy;
  QComboBox *m_metric, *m_band, *m_view, *m_scatterX, *m_scatterY, *m_curveX;
  PlotOptions m_options;
  int m_hidden = 0;
  /// Options, log axes' hidden points and padding after the plottables are in; then replot.
  void finishPlot(double pad);
  QCheckBox* m_members;
  QLabel* m_note;
  QTableWidget* m_table;
  QCustomPlot* m_plot;
};

}  // namespace lathe::ui
