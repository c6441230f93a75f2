// LiveChart: one QCustomPlot chart of one or more metrics of a run, fed incrementally. Each
// metric is drawn raw (thin, light) with its EMA over it (smoothing slider); the legend shows
// last/min/max of the raw data; drag to pan, wheel to zoom, double-click to follow the data again;
// a crosshair reads every curve at the mouse. The x axis maps a sample by step, epoch, wall time
// or dollars (XMapping). Points are kept so the mapping or smoothing can change at any time.
// Markers (a vertical line with a label) show where the run lost its machine or resumed; the labels
// of markers a few pixels apart merge into one line ("spot notice x3, resumed x3"), and labels never
// overlap each other or leave the plot (laid out at every replot, once the axes are placed). A note
// in the middle of the plot says why a chart is flat or empty (the Cost chart of an unpriced instance).
// The x axis can also be any other metric of the run (XMapping::Mode::metric: accuracy against
// cost/usd), paired sample by sample by step (pairByStep). The right-click menu holds the
// PlotOptions (log axes, auto / fixed y range, PNG / SVG export of what is shown).
#pragma once

#include <qcustomplot.h>
#include <QVector>
#include <map>
#include <string>
#include <vector>

#include "engine/store/store_types.h"
#include "widgets/ui/plot_options.h"
#include "widgets/ui/series_math.h"

namespace lathe::ui {

struct XMapping {
  enum class Mode { step, epoch, wall, dollars, metric };
  Mode mode = Mode::step;
  std::string metric;        ///< Mode::metric: the metric whose values are the x axis
  double stepsPerEpoch = 0;  ///< from the run's started event and train.epochs; 0: unknown
  double usdPerHour = 0;     ///< price x instances
  bool priceKnown = false;   ///< the run said its price (0 for an unpriced instance such as "local")
  /// The x of a sample (Mode::metric: its step; the chart pairs the metrics itself).
  double x(const Point& p) const;
  QString label() const;
};

class LiveChart : public QCustomPlot {
  Q_OBJECT
 public:
  LiveChart(const QString& title, const QStringList& metrics, QWidget* parent = nullptr);

  QStringList metrics() const { return m_metricNames; }
  bool hasMetric(const std::string& metric) const { return m_series.count(metric) > 0; }
  void clear();
  /// Appends points in step order (older or repeated steps are ignored).
  void append(const std::string& metric, const std::vector<Point>& points);
  void setXMapping(const XMapping& mapping);
  /// alpha in [0, 1): 0 = raw only.
  void setSmoothing(double alpha);
  /// Shows values divided by `divisor` (e.g. bytes as MiB: 1 << 20) and names the unit in the
  /// legend; call before data arrives.
  void setValueScale(double divisor, const QString& unit);
  /// Legend texts, autoscale while following, queued replot. Cheap when nothing changed.
  void refresh();
  bool dirty() const { return m_dirty; }
  int pointCount(const std::string& metric) const;
  /// The legend entry of a metric ("train/loss  last 0.31  min 0.29  max 2.30").
  QString legendText(const std::string& metric) const;
  QCPGraph* rawGraph(const std::string& metric) const;
  QCPGraph* smoothGraph(const std::string& metric) const;
  void setFollowing(bool follow);
  /// A cumulative metric (cost/usd) is drawn raw only, whatever the smoothing slider says.
  void setUnsmoothed(const std::string& metric);
  /// While following, the y axis spans at least `fraction` of the largest |value| (memory: 1.5 MiB
  /// of 329 MiB must not look like a climb).
  void setMinimumSpan(double fraction) { m_minSpanFraction = fraction; }
  /// The crosshair at x = `key`: snapped to the nearest real sample of any curve; returns the
  /// snapped x and the text (each curve's value at that x, or its nearest sample and where it is).
  std::pair<double, QString> crosshairAt(double key) const;
  bool following() const { return m_follow; }
  /// A vertical line labelled `label` at `step` (red: spot events; grey: a stage starting); wallMs < 0:
  /// its time on the wall/$ axes is that of the first sample at or after the step. Removed by clear().
  void addMarker(int64_t step, double wallMs, const QString& label, const QColor& color = QColor(200, 60, 40));
  int markerCount() const { return static_cast<int>(m_markers.size()); }
  /// Marker i under the current x mapping: its x (NaN while it cannot be placed) and label.
  std::pair<double, QString> marker(int i) const;
  /// The marker labels drawn at the last replot, with their rectangles in widget pixels: one per
  /// group of markers a few pixels apart ("spot notice x3, resumed x3", one line).
  std::vector<std::pair<QString, QRectF>> drawnMarkerLabels() const;
  /// A note in the middle of the plot ("" hides it): why the chart is flat or empty; or, with
  /// `topLeft`, in the plot's top-left corner, clear of a curve that rises from the bottom left.
  void setNote(const QString& text, bool topLeft = false);
  QString note() const { return m_note->visible() ? m_note->text() : QString(); }
  /// The run has ended: a metric with no sample is "(not logged by this run)", not "(no data yet)".
  void setRunEnded(bool ended);

  /// Mode::metric: the samples of the x metric (replaced / appended in step order).
  void setXMetricPoints(const std::vector<Point>& points);
  void appendXMetricPoints(const std::vector<Point>& points);
  /// The samples of a metric as the chart holds them (divided by the value scale).
  const std::vector<Point>& points(const std::string& metric) const;
  double valueDivisor() const { return m_divisor; }
  /// Log axes and the y range; throws std::invalid_argument for a fixed range it cannot show.
  void setPlotOptions(const PlotOptions& options);
  const PlotOptions& plotOptions() const { return m_options; }
  /// Points left out because a log axis cannot show them (<= 0), over every curve; the chart says
  /// so in its bottom-right corner.
  int hiddenPoints() const { return m_hidden; }
  QString hiddenNote() const { return m_hiddenNote->visible() ? m_hiddenNote->text() : QString(); }
  /// The right-click menu (PlotOptions, then whatever contextMenuBuilt adds); the caller owns it.
  QMenu* buildContextMenu();

 signals:
  /// Emitted by buildContextMenu so the owner can add its own actions (ChartPanel: "Remove chart").
  void contextMenuBuilt(QMenu* menu);

 protected:
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;
  void contextMenuEvent(QContextMenuEvent* event) override;

 private:
  struct Series {
    QCPGraph* raw = nullptr;
    QCPGraph* smooth = nullptr;
    std::vector<Point> points;
    Ema ema;
    double min = qQNaN(), max = qQNaN();
    QString name;
    bool smoothable = true;
    int hidden = 0;  ///< points a log axis cannot show, left out of the graphs
  };
  struct Marker {
    Point at;  ///< step, and wall_ms (< 0: unknown)
    QString label;
    QCPItemStraightLine* line = nullptr;
    QCPItemText* text = nullptr;
  };
  void rebuild(Series& s);  ///< redraws a series from its points (pairing, log filter)
  double markerX(const Marker& m) const;
  void placeMarkers();
  /// Merges and places the marker labels in pixels (connected to afterLayout: the axes are final).
  void layoutMarkerLabels();
  /// Tick counts for the plot's size (connected to afterLayout), so a short chart's labels never overlap.
  void fitTickCounts();
  /// Log axes and metric x need the whole series redrawn (filtering, pairing); plain step / wall
  /// x appends incrementally.
  bool incremental() const { return m_map.mode != XMapping::Mode::metric && !m_options.logX && !m_options.logY; }
  void rebuildAll();
  double alphaOf(const Series& s) const { return s.smoothable ? m_alpha : 0; }
  QStringList m_metricNames;
  std::map<std::string, Series> m_series;
  XMapping m_map;
  double m_alpha = 0;
  double m_divisor = 1;  // values are shown divided by this (setValueScale)
  double m_minSpanFraction = 0;
  bool m_dirty = false, m_follow = true, m_runEnded = false;
  QCPItemText* m_note = nullptr;
  QCPItemStraightLine* m_cross = nullptr;
  QCPItemText* m_crossText = nullptr;
  std::vector<Marker> m_markers;
  std::vector<Point> m_xPoints;  ///< Mode::metric: the x metric's samples
  PlotOptions m_options;
  int m_hidden = 0;
  bool m_rebuildPending = false;
  QCPItemText* m_hiddenNote = nullptr;
};

}  // namespace lathe::ui
