// LiveChart (see live_chart.h).
#include "widgets/ui/live_chart.h"

#include <QContextMenuEvent>
#include <QFontMetricsF>
#include <QMessageBox>
#include <QRegularExpression>
#include <algorithm>
#include <cmath>
#include <map>

#include "engine/store/store_types.h"
#include "widgets/common/chart_palette.h"

namespace lathe::ui {
namespace {

QString num(double v) { return std::isfinite(v) ? QString::fromStdString(plain_number(v)) : QString("-"); }

}  // namespace

double XMapping::x(const Point& p) const {
  switch (mode) {
    case Mode::step:
      return static_cast<double>(p.step);
    case Mode::epoch:
      return stepsPerEpoch > 0 ? p.step / stepsPerEpoch : static_cast<double>(p.step);
    case Mode::wall:
      return p.wall_ms / 1000.0;
    case Mode::dollars:
      return p.wall_ms / 3.6e6 * usdPerHour;
    case Mode::metric:
      return static_cast<double>(p.step);
  }
  return static_cast<double>(p.step);
}

QString XMapping::label() const {
  switch (mode) {
    case Mode::step:
      return "step";
    case Mode::epoch:
      return stepsPerEpoch > 0 ? "epoch" : "step (epoch length not known yet)";
    case Mode::wall:
      return "wall time (s)";
    case Mode::dollars:
      if (usdPerHour > 0)
        return "$ spent";
      return priceKnown ? "$ spent (the instance has no price: all at $0)" : "$ spent (price not known yet)";
    case Mode::metric:
      return QString::fromStdString(metric_label(metric));
  }
  return {};
}

LiveChart::LiveChart(const QString& title, const QStringList& metrics, QWidget* parent)
    : QCustomPlot(parent), m_metricNames(metrics) {
  setObjectName("chart:" + title);
  plotLayout()->insertRow(0);
  plotLayout()->addElement(0, 0, new QCPTextElement(this, title, QFont("sans", 9, QFont::Bold)));
  legend->setVisible(true);
  legend->setFont(QFont("sans", 7));
  // The legend (with last/min/max) sits in its own row under the plot, so it never hides the curves.
  axisRect()->insetLayout()->take(legend);
  plotLayout()->addElement(2, 0, legend);
  plotLayout()->setRowStretchFactor(2, 0.001);
  legend->setBorderPen(Qt::NoPen);
  legend->setMargins(QMargins(4, 0, 4, 2));
  setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  axisRect()->setRangeZoom(Qt::Horizontal);  // the wheel zooms the steps; y keeps the curve in view
  setNoAntialiasingOnDrag(true);
  // Hundreds of thousands of points per curve: fast polylines, no antialiasing on lines and grid
  // (text stays smooth), cached tick labels.
  setPlottingHints(QCP::phFastPolylines | QCP::phCacheLabels);
  setNotAntialiasedElements(QCP::aePlottables | QCP::aeGrid | QCP::aeSubGrid | QCP::aeAxes | QCP::aeItems);
  xAxis->setLabel(m_map.label());
  int i = 0;
  for (const QString& m : metrics) {
    Series s;
    s.name = m;
    const QColor c = widgets::chart_color(i++);
    s.raw = addGraph();
    QColor light = c;
    light.setAlpha(80);
    s.raw->setPen(QPen(light, 1));
    s.raw->setAntialiased(false);
    s.smooth = addGraph();
    s.smooth->setPen(QPen(c, 1.6));
    s.smooth->removeFromLegend();
    s.smooth->setAntialiased(false);
    s.raw->setName(m);
    m_series.emplace(m.toStdString(), std::move(s));
  }
  m_cross = new QCPItemStraightLine(this);
  m_cross->setPen(QPen(QColor(90, 90, 90), 1, Qt::DashLine));
  m_cross->setVisible(false);
  m_crossText = new QCPItemText(this);
  m_crossText->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
  m_crossText->position->setType(QCPItemPosition::ptAxisRectRatio);
  m_crossText->position->setCoords(0.01, 0.02);
  m_crossText->setTextAlignment(Qt::AlignLeft);
  m_crossText->setFont(QFont("sans", 7));
  m_crossText->setBrush(QColor(255, 255, 240, 220));
  m_crossText->setPadding(QMargins(3, 2, 3, 2));
  m_crossText->setVisible(false);
  m_hiddenNote = new QCPItemText(this);
  m_hiddenNote->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
  m_hiddenNote->position->setType(QCPItemPosition::ptAxisRectRatio);
  m_hiddenNote->position->setCoords(0.99, 0.98);
  m_hiddenNote->setFont(QFont("sans", 7));
  m_hiddenNote->setColor(QColor(183, 28, 28));
  m_hiddenNote->setVisible(false);
  m_note = new QCPItemText(this);
  m_note->setObjectName("chartNote");
  m_note->position->setType(QCPItemPosition::ptAxisRectRatio);
  m_note->position->setCoords(0.5, 0.65);  // below the marker labels, which stack from the top
  m_note->setPositionAlignment(Qt::AlignCenter);
  m_note->setTextAlignment(Qt::AlignCenter);
  m_note->setFont(QFont("sans", 8));
  m_note->setColor(QColor(85, 85, 85));
  m_note->setBrush(QColor(255, 255, 255, 215));
  m_note->setPadding(QMargins(4, 2, 4, 2));
  m_note->setClipToAxisRect(true);
  m_note->setVisible(false);
  connect(this, &QCustomPlot::afterLayout, this, &LiveChart::layoutMarkerLabels);
  connect(this, &QCustomPlot::afterLayout, this, &LiveChart::fitTickCounts);
  connect(this, &QCustomPlot::mousePress, this, [this](QMouseEvent*) { m_follow = false; });
  connect(this, &QCustomPlot::mouseWheel, this, [this](QWheelEvent*) { m_follow = false; });
  setSmoothing(0);
}

void LiveChart::setUnsmoothed(const std::string& metric) {
  auto it = m_series.find(metric);
  if (it == m_series.end())
    return;
  it->second.smoothable = false;
  setSmoothing(m_alpha);
}

void LiveChart::clear() {
  for (auto& [name, s] : m_series) {
    s.points.clear();
    s.ema = Ema(alphaOf(s));
    s.min = s.max = qQNaN();
    s.raw->data()->clear();
    s.smooth->data()->clear();
    s.hidden = 0;
  }
  m_xPoints.clear();
  m_hidden = 0;
  for (Marker& m : m_markers) {
    removeItem(m.line);
    removeItem(m.text);
  }
  m_markers.clear();
  m_note->setVisible(false);  // the next run says its own
  m_runEnded = false;
  m_follow = true;
  m_dirty = true;
}

void LiveChart::setValueScale(double divisor, const QString& unit) {
  m_divisor = divisor > 0 ? divisor : 1;
  for (auto& [name, s] : m_series) {
    s.name = QString::fromStdString(name) + (unit.isEmpty() ? "" : " (" + unit + ")");
    s.raw->setName(legendText(name));
  }
}

void LiveChart::append(const std::string& metric, const std::vector<Point>& points) {
  auto it = m_series.find(metric);
  if (it == m_series.end() || points.empty())
    return;
  Series& s = it->second;
  const bool direct = incremental();
  QVector<double> keys, raw, smooth;
  if (direct) {
    keys.reserve(static_cast<int>(points.size()));
    raw.reserve(keys.capacity());
    smooth.reserve(keys.capacity());
  }
  const size_t before = s.points.size();
  for (const Point& p : points) {
    if (!s.points.empty() && p.step <= s.points.back().step)
      continue;
    s.points.push_back(p);
    s.points.back().value /= m_divisor;
    if (std::isfinite(s.points.back().value)) {
      const double v = s.points.back().value;
      s.min = std::isnan(s.min) ? v : std::min(s.min, v);
      s.max = std::isnan(s.max) ? v : std::max(s.max, v);
    }
    if (direct) {
      keys.push_back(m_map.x(p));
      raw.push_back(s.points.back().value);
      smooth.push_back(s.ema.push(s.points.back().value));
    }
  }
  if (s.points.size() == before)
    return;
  m_dirty = true;
  if (!direct) {  // pairing or log filtering: redrawn whole at the next refresh
    m_rebuildPending = true;
    return;
  }
  s.raw->addData(keys, raw, true);
  if (alphaOf(s) > 0)
    s.smooth->addData(keys, smooth, true);
}

void LiveChart::rebuild(Series& s) {
  QVector<double> keys, raw, smooth;
  keys.reserve(static_cast<int>(s.points.size()));
  raw.reserve(keys.capacity());
  s.ema = Ema(alphaOf(s));
  const bool smoothed = alphaOf(s) > 0;
  const bool byMetric = m_map.mode == XMapping::Mode::metric;
  if (byMetric) {
    for (const auto& [x, y] : pairByStep(m_xPoints, s.points)) {
      keys.push_back(x);
      raw.push_back(y);
      if (smoothed)
        smooth.push_back(s.ema.push(y));
    }
  } else {
    for (const Point& p : s.points) {
      keys.push_back(m_map.x(p));
      raw.push_back(p.value);
      if (smoothed)
        smooth.push_back(s.ema.push(p.value));
    }
  }
  s.hidden = 0;
  QVector<double> smoothKeys = keys;
  if (m_options.logX || m_options.logY) {
    s.hidden = dropUnplottable(keys, raw, m_options.logX, m_options.logY);
    if (smoothed)
      dropUnplottable(smoothKeys, smooth, m_options.logX, m_options.logY);
  }
  // One metric against another need not rise with the step: then dots, since a line drawn in x
  // order would join samples that are not neighbours in time.
  const bool monotonic = !byMetric || std::is_sorted(keys.begin(), keys.end());
  s.raw->setLineStyle(monotonic ? QCPGraph::lsLine : QCPGraph::lsNone);
  s.smooth->setLineStyle(monotonic ? QCPGraph::lsLine : QCPGraph::lsNone);
  s.raw->setData(keys, raw, !byMetric);
  if (smoothed)
    s.smooth->setData(smoothKeys, smooth, !byMetric);
  else
    s.smooth->data()->clear();
}

void LiveChart::rebuildAll() {
  m_hidden = 0;
  for (auto& [name, s] : m_series) {
    rebuild(s);
    m_hidden += s.hidden;
  }
  m_rebuildPending = false;
}

void LiveChart::setXMapping(const XMapping& mapping) {
  m_map = mapping;
  xAxis->setLabel(m_map.label());
  rebuildAll();
  m_follow = true;
  m_dirty = true;
}

void LiveChart::setSmoothing(double alpha) {
  m_alpha = std::clamp(alpha, 0.0, 0.999);
  for (auto& [name, s] : m_series) {
    QColor c = s.smooth->pen().color();
    c.setAlpha(alphaOf(s) > 0 ? 70 : 255);
    s.raw->setPen(QPen(c, 1));
  }
  rebuildAll();
  m_dirty = true;
}

QString LiveChart::legendText(const std::string& metric) const {
  auto it = m_series.find(metric);
  if (it == m_series.end())
    return {};
  const Series& s = it->second;
  if (s.points.empty())
    return s.name + (m_runEnded ? "  (not logged by this run)" : "  (no data yet)");
  return QString("%1  last %2  min %3  max %4").arg(s.name, num(s.points.back().value), num(s.min), num(s.max));
}

void LiveChart::refresh() {
  if (!m_dirty)
    return;
  if (m_rebuildPending)
    rebuildAll();
  for (auto& [name, s] : m_series) {
    s.raw->setName(legendText(name));
    // A series of one or a few points (test loss after the first epochs) shows each point.
    QColor c = s.smooth->pen().color();
    c.setAlpha(255);
    const bool dots = s.raw->lineStyle() == QCPGraph::lsNone;
    s.raw->setScatterStyle(s.points.size() <= 30 || dots ? QCPScatterStyle(QCPScatterStyle::ssDisc, c, c, dots ? 3 : 5)
                                                         : QCPScatterStyle(QCPScatterStyle::ssNone));
  }
  m_hiddenNote->setText(hiddenPointsNote(m_hidden));
  m_hiddenNote->setVisible(m_hidden > 0);
  if (m_follow && !incremental()) {  // the kept extremes do not hold: paired or filtered points
    bool any = false;
    for (const auto& [name, s] : m_series)
      any = any || !s.raw->data()->isEmpty();
    if (any) {
      xAxis->rescale(true);
      yAxis->rescale(true);
      padAxis(xAxis, 0.02);
      padAxis(yAxis, 0.05);
    } else {
      xAxis->setRange(m_options.logX ? QCPRange(1, 10) : QCPRange(0, 1));
      yAxis->setRange(m_options.logY ? QCPRange(1, 10) : QCPRange(0, 1));
    }
  } else if (m_follow) {  // from the kept extremes: O(1), never a pass over 200k points per frame
    bool any = false;
    double x0 = 0, x1 = 0, y0 = 0, y1 = 0;
    for (auto& [name, s] : m_series) {
      if (s.points.empty() || std::isnan(s.min))
        continue;
      const double a = m_map.x(s.points.front()), b = m_map.x(s.points.back());
      x0 = any ? std::min(x0, a) : a;
      x1 = any ? std::max(x1, b) : b;
      y0 = any ? std::min(y0, s.min) : s.min;  // the EMA stays inside [min, max] of the raw data
      y1 = any ? std::max(y1, s.max) : s.max;
      any = true;
    }
    if (!any) {
      xAxis->setRange(0, 1);
      yAxis->setRange(0, 1);
    } else if (y1 == y0 && y0 == 0) {  // all zero (e.g. $0 on a local machine): 0 at the bottom, not 1e-9 ticks
      xAxis->setRange(x0, x1 > x0 ? x1 : x0 + 1);
      yAxis->setRange(0, 1);
    } else {  // a little headroom; a flat series gets a visible band around its value
      const double pad = y1 > y0 ? (y1 - y0) * 0.05 : std::abs(y0) * 0.05;
      double lo = y0 - pad, hi = y1 + pad;
      const double min_span = m_minSpanFraction * std::max(std::abs(y0), std::abs(y1));
      if (hi - lo < min_span) {
        const double mid = 0.5 * (y0 + y1);
        lo = mid - 0.5 * min_span;
        hi = mid + 0.5 * min_span;
        if (y0 >= 0 && lo < 0) {  // sizes never go below 0
          hi -= lo;
          lo = 0;
        }
      }
      xAxis->setRange(x0, x1 > x0 ? x1 : x0 + 1);
      yAxis->setRange(lo, hi);
    }
  }
  if (m_options.fixedY)
    yAxis->setRange(m_options.yMin, m_options.yMax);
  placeMarkers();
  m_dirty = false;
  replot(QCustomPlot::rpQueuedReplot);
}

void LiveChart::addMarker(int64_t step, double wallMs, const QString& label, const QColor& color) {
  Marker m;
  m.at.step = step;
  m.at.wall_ms = wallMs;
  m.label = label;
  m.line = new QCPItemStraightLine(this);
  m.line->setPen(QPen(color, 1, Qt::DashDotLine));
  m.text = new QCPItemText(this);
  m.text->position->setType(QCPItemPosition::ptAbsolute);  // pixels: layoutMarkerLabels places it
  m.text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
  m.text->setTextAlignment(Qt::AlignLeft);
  m.text->setColor(color);
  m.text->setFont(QFont("sans", 7));
  m.text->setBrush(QColor(255, 255, 255, 190));  // readable over the curves
  m.text->setPadding(QMargins(2, 0, 2, 0));
  m.text->setVisible(false);
  m.text->setText(label);
  m_markers.push_back(m);
  m_dirty = true;
}

double LiveChart::markerX(const Marker& m) const {
  if (m_map.mode == XMapping::Mode::metric)
    return qQNaN();  // a step has no single place on another metric's axis
  if (m_map.mode == XMapping::Mode::step || m.at.wall_ms >= 0)
    return m_map.x(m.at);
  // The run clock at that step: the first sample at or after it (points are in step order).
  const Point* best = nullptr;
  for (const auto& [name, s] : m_series) {
    auto it = std::lower_bound(s.points.begin(), s.points.end(), m.at.step,
                               [](const Point& p, int64_t step) { return p.step < step; });
    if (it != s.points.end() && (!best || it->step < best->step))
      best = &*it;
  }
  if (!best)
    return qQNaN();
  Point p = *best;
  p.step = m.at.step;
  return m_map.x(p);
}

void LiveChart::placeMarkers() {
  for (Marker& m : m_markers) {
    const double x = markerX(m);
    const bool shown = !std::isnan(x);
    m.line->setVisible(shown);
    m.text->setVisible(shown);
    if (!shown)
      continue;
    m.line->point1->setCoords(x, 0);
    m.line->point2->setCoords(x, 1);
  }
}

namespace {

/// A marker's label as a merged label shows it: "resumed from 1365" is "resumed" beside others
/// (its line is at that step), so resumes at 1365, 1366 and 1367 count as "resumed x3".
QString drawnLabel(const QString& label, bool merged) {
  static const QRegularExpression kFromStep(" from -?[0-9]+$");
  return merged ? QString(label).remove(kFromStep) : label;
}

}  // namespace

void LiveChart::fitTickCounts() {
  // A chart squeezed by the run's overview under it (80 px of plot) got 7 y labels on top of each
  // other: about one tick per 35 px of plot height, one per 55 px of width (2 to QCustomPlot's 5).
  const int y = std::clamp(axisRect()->height() / 35, 2, 5), x = std::clamp(axisRect()->width() / 55, 2, 5);
  if (y == yAxis->ticker()->tickCount() && x == xAxis->ticker()->tickCount())
    return;
  yAxis->ticker()->setTickCount(y);
  xAxis->ticker()->setTickCount(x);
  replot(QCustomPlot::rpQueuedReplot);  // the ticks of this frame are already placed
}

void LiveChart::layoutMarkerLabels() {
  // Markers a few pixels apart (a spot notice, its interruption and the resume, at one step) get
  // one label naming each kind once with its count; labels go right of their line, or left of it
  // where they would leave the plot, and down below any label they would overlap.
  constexpr double kMergePx = 24;
  const QRect area = axisRect()->rect();
  std::vector<std::pair<double, size_t>> shown;  // pixel x, marker index
  for (size_t i = 0; i < m_markers.size(); ++i) {
    Marker& m = m_markers[i];
    m.text->setVisible(false);
    const double x = markerX(m);
    if (std::isnan(x) || !m.line->visible())
      continue;
    const double px = xAxis->coordToPixel(x);
    if (std::isfinite(px) && px >= area.left() - 1 && px <= area.right() + 1)
      shown.emplace_back(px, i);
  }
  std::stable_sort(shown.begin(), shown.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<QRectF> placed;
  for (size_t start = 0; start < shown.size();) {
    size_t end = start + 1;
    while (end < shown.size() && shown[end].first - shown[start].first <= kMergePx)
      ++end;
    QStringList order;
    std::map<QString, int> counts;
    for (size_t k = start; k < end; ++k) {
      const QString label = drawnLabel(m_markers[shown[k].second].label, end - start > 1);
      if (counts[label]++ == 0)
        order << label;
    }
    QStringList parts;
    for (const QString& label : order)
      parts << (counts[label] > 1 ? QString("%1 %2%3").arg(label, QChar(0x00d7)).arg(counts[label]) : label);
    QCPItemText* text = m_markers[shown[start].second].text;
    text->setText(parts.join(", "));
    const QFontMetricsF fm(text->font());
    const QMargins pad = text->padding();
    const QSizeF size(fm.horizontalAdvance(text->text()) + pad.left() + pad.right() + 2,
                      fm.height() + pad.top() + pad.bottom() + 1);
    const double px = shown[start].first;
    // Right of the line; left of it where that leaves the plot; else the wider side, kept inside.
    double left = px + 3;
    if (left + size.width() > area.right())
      left = px - 3 - size.width() >= area.left()   ? px - 3 - size.width()
             : area.right() - px > px - area.left() ? area.right() - size.width()
                                                    : area.left();
    left = std::max<double>(left, area.left());
    QRectF rect(QPointF(left, area.top() + 2), size);
    for (bool moved = true; moved;) {  // below every label it would overlap
      moved = false;
      for (const QRectF& other : placed)
        if (rect.intersects(other)) {
          rect.moveTop(other.bottom() + 1);
          moved = true;
        }
    }
    text->position->setCoords(rect.topLeft());
    text->setVisible(true);
    placed.push_back(rect);
    start = end;
  }
}

std::vector<std::pair<QString, QRectF>> LiveChart::drawnMarkerLabels() const {
  std::vector<std::pair<QString, QRectF>> out;
  for (const Marker& m : m_markers)
    if (m.text->visible())
      out.emplace_back(m.text->text(), QRectF(m.text->topLeft->pixelPosition(), m.text->bottomRight->pixelPosition()));
  return out;
}

void LiveChart::setNote(const QString& text, bool topLeft) {
  m_note->position->setCoords(topLeft ? 0.02 : 0.5, topLeft ? 0.04 : 0.65);
  m_note->setPositionAlignment(topLeft ? Qt::AlignLeft | Qt::AlignTop : Qt::AlignCenter);
  m_note->setTextAlignment(topLeft ? Qt::AlignLeft : Qt::AlignCenter);
  if (text == note())
    return;
  m_note->setText(text);
  m_note->setVisible(!text.isEmpty());
  m_dirty = true;
}

void LiveChart::setRunEnded(bool ended) {
  if (ended == m_runEnded)
    return;
  m_runEnded = ended;
  m_dirty = true;
}

std::pair<double, QString> LiveChart::marker(int i) const {
  const Marker& m = m_markers.at(static_cast<size_t>(i));
  return {markerX(m), m.label};
}

int LiveChart::pointCount(const std::string& metric) const {
  auto it = m_series.find(metric);
  return it == m_series.end() ? 0 : static_cast<int>(it->second.points.size());
}

QCPGraph* LiveChart::rawGraph(const std::string& metric) const {
  auto it = m_series.find(metric);
  return it == m_series.end() ? nullptr : it->second.raw;
}

QCPGraph* LiveChart::smoothGraph(const std::string& metric) const {
  auto it = m_series.find(metric);
  return it == m_series.end() ? nullptr : it->second.smooth;
}

void LiveChart::setXMetricPoints(const std::vector<Point>& points) {
  m_xPoints.clear();
  appendXMetricPoints(points);
  m_rebuildPending = true;
}

void LiveChart::appendXMetricPoints(const std::vector<Point>& points) {
  const size_t before = m_xPoints.size();
  for (const Point& p : points)
    if (m_xPoints.empty() || p.step > m_xPoints.back().step)
      m_xPoints.push_back(p);
  if (m_xPoints.size() != before && m_map.mode == XMapping::Mode::metric) {
    m_rebuildPending = true;
    m_dirty = true;
  }
}

const std::vector<Point>& LiveChart::points(const std::string& metric) const {
  static const std::vector<Point> kNone;
  auto it = m_series.find(metric);
  return it == m_series.end() ? kNone : it->second.points;
}

void LiveChart::setPlotOptions(const PlotOptions& options) {
  applyPlotOptions(this, options);  // throws before anything is kept
  m_options = options;
  rebuildAll();
  m_follow = true;
  m_dirty = true;
}

QMenu* LiveChart::buildContextMenu() {
  auto* menu = new QMenu(this);
  addPlotOptionsActions(menu, this, m_options, [this](const PlotOptions& o) {
    try {
      setPlotOptions(o);
    } catch (const std::exception& e) {
      QMessageBox::warning(this, "Chart options", e.what());
      return;
    }
    refresh();
  });
  emit contextMenuBuilt(menu);
  return menu;
}

void LiveChart::contextMenuEvent(QContextMenuEvent* event) {
  QMenu* menu = buildContextMenu();
  menu->exec(event->globalPos());
  menu->deleteLater();
}

void LiveChart::setFollowing(bool follow) {
  m_follow = follow;
  m_dirty = true;
  refresh();
}

void LiveChart::mouseMoveEvent(QMouseEvent* event) {
  QCustomPlot::mouseMoveEvent(event);
  if (!axisRect()->rect().contains(event->pos())) {
    leaveEvent(event);
    return;
  }
  const auto [key, text] = crosshairAt(xAxis->pixelToCoord(event->pos().x()));
  if (text.isEmpty()) {
    leaveEvent(event);
    return;
  }
  m_cross->point1->setCoords(key, 0);
  m_cross->point2->setCoords(key, 1);
  m_cross->setVisible(true);
  m_crossText->setText(text);
  m_crossText->setVisible(true);
  replot(QCustomPlot::rpQueuedReplot);
}

std::pair<double, QString> LiveChart::crosshairAt(double key) const {
  // The sample of a curve nearest to x.
  const auto nearest = [](const QCPGraph* g, double x) {
    auto it = g->data()->findBegin(x, false);  // first key >= x
    if (it == g->data()->constEnd())
      return std::prev(it);
    if (it != g->data()->constBegin() && std::abs(std::prev(it)->key - x) <= std::abs(it->key - x))
      return std::prev(it);
    return it;
  };
  double snapped = qQNaN();
  for (const auto& [name, s] : m_series) {
    if (s.raw->data()->isEmpty())
      continue;
    const double k = nearest(s.raw, key)->key;
    if (std::isnan(snapped) || std::abs(k - key) < std::abs(snapped - key))
      snapped = k;
  }
  if (std::isnan(snapped))
    return {key, QString()};
  const QString axis = xAxis->label().section(' ', 0, 1);
  QStringList lines{QString("%1 %2").arg(axis, num(snapped))};
  for (const auto& [name, s] : m_series) {
    if (s.raw->data()->isEmpty())
      continue;
    const auto it = nearest(s.raw, snapped);
    if (it->key == snapped)
      lines << QString("%1: %2").arg(s.name, num(it->value));
    else  // no sample of this curve here: its nearest one, and where it is
      lines << QString("%1: %2 (at %3 %4)").arg(s.name, num(it->value), axis, num(it->key));
  }
  return {snapped, lines.join("\n")};
}

void LiveChart::leaveEvent(QEvent* event) {
  QCustomPlot::leaveEvent(event);
  m_cross->setVisible(false);
  m_crossText->setVisible(false);
  replot(QCustomPlot::rpQueuedReplot);
}

void LiveChart::mouseDoubleClickEvent(QMouseEvent* event) {
  QCustomPlot::mouseDoubleClickEvent(event);
  setFollowing(true);
}

}  // namespace lathe::ui
