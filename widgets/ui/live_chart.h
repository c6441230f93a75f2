// LiveChart: one QCustomPlot chart of one or more metrics of a run, fed incrementally. Each
// metric is drawn raw (thin, light) with its EMA over it (smoothing slider); the legend shows
// last/min/max of the raw data; drag to pan, wheel to zoom, double-click to follow the data again;
// a crosshair reads every curve at the mouse. The x axis maps a sample by step, epoch, wall time
// or dollars (XMapping). Points are kept so the mapping or smoothing can change at any time.
// Markers (a vertical line with a label) show where the run lost its machine or resumed.
#pragma once

#include <qcustomplot.h>
#include <QVector>
#include <map>
#include <string>
#include <vector>

#include "engine/store/store_types.h"
#include "widgets/ui/series_math.h"

namespace lathe::ui {

struct XMapping {
  enum class Mode { step, epoch, wall, dollars };
  Mode mode = Mode::step;
  double stepsPerEpoch = 0;  ///< from the run's started event and train.epochs; 0: unknown
  double usdPerHour = 0;     ///< price x instances; 0: unknown
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
  /// A vertical line labelled `label` at `step`; wallMs < 0: its time on the wall/$ axes is that of
  /// the first sample at or after the step. Removed by clear().
  void addMarker(int64_t step, double wallMs, const QString& label);
  int markerCount() const { return static_cast<int>(m_markers.size()); }
  /// Marker i under the current x mapping: its x (NaN while it cannot be placed) and label.
  std::pair<double, QString> marker(int i) const;

 protected:
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  struct Series {
    QCPGraph* raw = nullptr;
    QCPGraph* smooth = nullptr;
    std::vector<Point> points;
    Ema ema;
    double min = qQNaN(), max = qQNaN();
    QString name;
    bool smoothable = true;
  };
  struct Marker {
    Point at;  ///< step, and wall_ms (< 0: unknown)
    QString label;
    QCPItemStraightLine* line = nullptr;
    QCPItemText* text = nullptr;
  };
  void rebuild(Series& s);
  double markerX(const Marker& m) const;
  void placeMarkers();
  double alphaOf(const Series& s) const { return s.smoothable ? m_alpha : 0; }
  QStringList m_metricNames;
  std::map<std::string, Series> m_series;
  XMapping m_map;
  double m_alpha = 0;
  double m_divisor = 1;  // values are shown divided by this (setValueScale)
  double m_minSpanFraction = 0;
  bool m_dirty = false, m_follow = true;
  QCPItemStraightLine* m_cross = nullptr;
  QCPItemText* m_crossText = nullptr;
  std::vector<Marker> m_markers;
};

}  // namespace lathe::ui
