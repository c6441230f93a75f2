// ParallelCoordsPlot (see parallel_coords_plot.h).
#include "widgets/ui/parallel_coords_plot.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace lathe::ui {
namespace {

/// Bucket colours, low to high value on the last axis (blue to red, readable on white).
QColor bucketColor(int b) {
  static const QColor colors[ParallelCoordsPlot::kBuckets] = {QColor(49, 54, 149),   QColor(69, 117, 180),
                                                              QColor(116, 173, 209), QColor(253, 174, 97),
                                                              QColor(244, 109, 67),  QColor(165, 0, 38)};
  return colors[std::clamp(b, 0, ParallelCoordsPlot::kBuckets - 1)];
}

}  // namespace

/// Every run's polyline, grouped; drawn with one drawLines call per group.
class ParallelLines : public QCPLayerable {
 public:
  ParallelLines(QCustomPlot* plot, const ParallelCoordsModel* const* model)
      : QCPLayerable(plot, QString(), plot->axisRect()), m_model(model) {
    for (int i = 0; i < ParallelCoordsPlot::kBuckets + 2; ++i) {
      if (i == 0) {
        m_pens.push_back(QPen(QColor(185, 185, 185), 0));
      } else if (i <= ParallelCoordsPlot::kBuckets) {
        m_pens.push_back(QPen(bucketColor(i - 1), 0));
      } else {
        m_pens.push_back(QPen(QColor(20, 20, 20), 2.2));
      }
    }
    m_groups.resize(m_pens.size());
  }
  std::vector<std::vector<uint32_t>> m_groups;
  int segments(size_t group) const {
    const ParallelCoordsModel* model = *m_model;
    int n = 0;
    if (!model)
      return 0;
    for (uint32_t r : m_groups.at(group))
      for (size_t a = 0; a + 1 < model->axisCount(); ++a)
        n += !std::isnan(model->axis(a).normalized[r]) && !std::isnan(model->axis(a + 1).normalized[r]);
    return n;
  }

 protected:
  void applyDefaultAntialiasingHint(QCPPainter* painter) const override {
    applyAntialiasingHint(painter, false, QCP::aePlottables);
  }
  void draw(QCPPainter* painter) override {
    const ParallelCoordsModel* model = *m_model;
    if (!model || model->axisCount() < 2)
      return;
    const QRect rect = parentPlot()->axisRect()->rect();
    const QCPRange xr = parentPlot()->xAxis->range(), yr = parentPlot()->yAxis->range();
    if (m_stale || rect != m_rect || xr != m_xRange || yr != m_yRange)
      buildLines(*model);
    m_rect = rect;
    m_xRange = xr;
    m_yRange = yr;
    for (size_t g = 0; g < m_lines.size(); ++g) {
      if (m_lines[g].isEmpty())
        continue;
      painter->setPen(m_pens[g]);
      painter->drawLines(m_lines[g]);
    }
  }

 public:
  /// The groups or the model changed: the segments are built again at the next draw.
  void markStale() { m_stale = true; }

 private:
  /// Each group's segments in whole pixels, each distinct segment once: runs of a sweep share
  /// their knob values, so between two knob axes thousands of runs draw the same few segments.
  void buildLines(const ParallelCoordsModel& model) {
    const size_t axes = model.axisCount();
    QCPAxis* xAxis = parentPlot()->xAxis;
    QCPAxis* yAxis = parentPlot()->yAxis;
    std::vector<int> px(axes);
    std::vector<const double*> norm(axes);
    for (size_t a = 0; a < axes; ++a) {
      px[a] = static_cast<int>(std::lround(xAxis->coordToPixel(static_cast<double>(a))));
      norm[a] = model.axis(a).normalized.data();
    }
    const double y0 = yAxis->coordToPixel(0), dy = yAxis->coordToPixel(1) - y0;
    m_lines.assign(m_groups.size(), {});
    std::unordered_set<uint64_t> seen;
    for (size_t g = 0; g < m_groups.size(); ++g) {
      seen.clear();
      QVector<QLine>& lines = m_lines[g];
      for (uint32_t r : m_groups[g])
        for (size_t a = 0; a + 1 < axes; ++a) {
          const double ta = norm[a][r], tb = norm[a + 1][r];
          if (std::isnan(ta) || std::isnan(tb))
            continue;
          const int ya = static_cast<int>(std::lround(y0 + ta * dy)), yb = static_cast<int>(std::lround(y0 + tb * dy));
          const uint64_t key = (static_cast<uint64_t>(a) << 40) | (static_cast<uint64_t>(ya & 0xfffff) << 20) |
                               static_cast<uint64_t>(yb & 0xfffff);
          if (seen.insert(key).second)
            lines.append(QLine(px[a], ya, px[a + 1], yb));
        }
    }
    m_stale = false;
  }

 private:
  const ParallelCoordsModel* const* m_model;  ///< the plot's model pointer, which may change
  std::vector<QPen> m_pens;
  std::vector<QVector<QLine>> m_lines;  ///< per group, kept while nothing changes
  bool m_stale = true;
  QRect m_rect;
  QCPRange m_xRange, m_yRange;
};

ParallelCoordsPlot::ParallelCoordsPlot(QWidget* parent) : QCustomPlot(parent) {
  setObjectName("parallelCoordinates");
  xAxis->setVisible(false);
  yAxis->setVisible(false);
  axisRect()->setAutoMargins(QCP::msNone);
  axisRect()->setMargins(QMargins(10, 10, 10, 10));
  setPlottingHints(QCP::phFastPolylines | QCP::phCacheLabels);
  setNotAntialiasedElements(QCP::aePlottables | QCP::aeItems);
  yAxis->setRange(-0.1, 1.12);
  m_lines = new ParallelLines(this, &m_model);
}

int ParallelCoordsPlot::runsIn(int group) const {
  return static_cast<int>(m_lines->m_groups.at(static_cast<size_t>(group)).size());
}

int ParallelCoordsPlot::segmentsIn(int group) const { return m_lines->segments(static_cast<size_t>(group)); }

void ParallelCoordsPlot::rebuild() {
  const size_t n = m_model ? m_model->axisCount() : 0;
  xAxis->setRange(-0.45, n > 0 ? static_cast<double>(n) - 0.55 : 1);
  if (m_current >= static_cast<int>(n))
    m_current = static_cast<int>(n) - 1;
  placeAxisItems();
  refreshSelection();
}

void ParallelCoordsPlot::refreshSelection() {
  fillGroups();
  placeBrushItems();
  replot(QCustomPlot::rpQueuedReplot);
}

void ParallelCoordsPlot::setHighlighted(const std::vector<size_t>& runs) {
  m_highlighted = runs;
  fillGroups();
  replot(QCustomPlot::rpQueuedReplot);
}

void ParallelCoordsPlot::fillGroups() {
  std::vector<std::vector<uint32_t>>& groups = m_lines->m_groups;
  for (auto& g : groups)
    g.clear();
  m_lines->markStale();
  if (!m_model || m_model->axisCount() == 0)
    return;
  const size_t runs = m_model->runCount();
  const std::vector<uint8_t>& selected = m_model->selected();
  const std::vector<double>& colorBy = m_model->axis(m_model->axisCount() - 1).normalized;
  for (size_t r = 0; r < runs; ++r) {
    if (!selected[r]) {
      groups[0].push_back(static_cast<uint32_t>(r));
      continue;
    }
    const double t = colorBy[r];
    const int bucket = std::isnan(t) ? 0 : std::min(kBuckets - 1, static_cast<int>(t * kBuckets));
    groups[static_cast<size_t>(1 + bucket)].push_back(static_cast<uint32_t>(r));
  }
  for (size_t r : m_highlighted)
    if (r < runs)
      groups.back().push_back(static_cast<uint32_t>(r));
  m_lines->markStale();
}

void ParallelCoordsPlot::placeAxisItems() {
  for (QCPAbstractItem* item : m_axisItems)
    removeItem(item);
  m_axisItems.clear();
  if (!m_model)
    return;
  const QFont small("sans", 7), bold("sans", 8, QFont::Bold);
  const auto text = [&](double x, double y, const QString& s, Qt::Alignment align, const QFont& f) {
    auto* t = new QCPItemText(this);
    t->position->setCoords(x, y);
    t->setPositionAlignment(align);
    t->setText(s);
    t->setFont(f);
    t->setBrush(QColor(255, 255, 255, 190));
    m_axisItems.push_back(t);
    return t;
  };
  for (size_t a = 0; a < m_model->axisCount(); ++a) {
    const ParallelAxis& axis = m_model->axis(a);
    const double x = static_cast<double>(a);
    auto* line = new QCPItemLine(this);
    line->start->setCoords(x, 0);
    line->end->setCoords(x, 1);
    line->setPen(QPen(static_cast<int>(a) == m_current ? QColor(200, 60, 40) : QColor(60, 60, 60),
                      static_cast<int>(a) == m_current ? 2.5 : 1.2));
    m_axisItems.push_back(line);
    text(x, 1.03, QString::fromStdString(axis.name) + (axis.log ? " (log)" : ""), Qt::AlignHCenter | Qt::AlignBottom,
         bold);
    if (axis.categorical) {
      const size_t k = axis.categories.size();
      const size_t every = std::max<size_t>(1, k / 12);  // at most about a dozen labels
      for (size_t c = 0; c < k; c += every)
        text(x + 0.02, k <= 1 ? 0.5 : static_cast<double>(c) / static_cast<double>(k - 1),
             QString::fromStdString(axis.categories[c]), Qt::AlignLeft | Qt::AlignVCenter, small);
    } else {
      for (double t : {0.0, 0.5, 1.0})
        text(x + 0.02, t, QString::fromStdString(m_model->label(a, m_model->valueAt(a, t))),
             Qt::AlignLeft | Qt::AlignVCenter, small);
    }
  }
}

void ParallelCoordsPlot::placeBrushItems() {
  for (QCPAbstractItem* item : m_brushItems)
    removeItem(item);
  m_brushItems.clear();
  if (!m_model)
    return;
  for (size_t a = 0; a < m_model->axisCount(); ++a) {
    const auto& brush = m_model->axis(a).brush;
    if (!brush)
      continue;
    auto* rect = new QCPItemRect(this);
    const double x = static_cast<double>(a);
    rect->topLeft->setCoords(x - 0.07, brush->second);
    rect->bottomRight->setCoords(x + 0.07, brush->first);
    rect->setPen(QPen(QColor(200, 60, 40), 1));
    rect->setBrush(QColor(200, 60, 40, 50));
    m_brushItems.push_back(rect);
  }
}

void ParallelCoordsPlot::setCurrentAxis(int axis) {
  if (axis == m_current)
    return;
  m_current = axis;
  placeAxisItems();
  replot(QCustomPlot::rpQueuedReplot);
  emit currentAxisChanged(axis);
}

void ParallelCoordsPlot::brushAxis(int axis, double t0, double t1) {
  if (!m_model || axis < 0 || axis >= static_cast<int>(m_model->axisCount()))
    return;
  m_model->setBrush(static_cast<size_t>(axis), std::clamp(t0, 0.0, 1.0), std::clamp(t1, 0.0, 1.0));
  refreshSelection();
  emit brushChanged();
}

int ParallelCoordsPlot::axisAtPixel(double x) const {
  if (!m_model || m_model->axisCount() == 0)
    return -1;
  const double key = xAxis->pixelToCoord(x);
  const long a = std::lround(key);
  if (a < 0 || a >= static_cast<long>(m_model->axisCount()) || std::abs(key - static_cast<double>(a)) > 0.2)
    return -1;
  return static_cast<int>(a);
}

double ParallelCoordsPlot::tAtPixel(double y) const { return std::clamp(yAxis->pixelToCoord(y), 0.0, 1.0); }

void ParallelCoordsPlot::mousePressEvent(QMouseEvent* event) {
  const int axis = axisAtPixel(event->position().x());
  if (axis >= 0)
    setCurrentAxis(axis);
  if (event->button() == Qt::RightButton && axis >= 0) {
    emit axisMenuRequested(axis, event->globalPosition().toPoint());
    return;
  }
  if (event->button() == Qt::LeftButton && axis >= 0) {
    m_dragAxis = axis;
    m_dragFrom = tAtPixel(event->position().y());
    m_dragged = false;
    return;
  }
  QCustomPlot::mousePressEvent(event);
}

void ParallelCoordsPlot::mouseMoveEvent(QMouseEvent* event) {
  if (m_dragAxis >= 0 && (event->buttons() & Qt::LeftButton)) {
    const double t = tAtPixel(event->position().y());
    if (std::abs(t - m_dragFrom) > 0.005) {
      m_dragged = true;
      brushAxis(m_dragAxis, m_dragFrom, t);
    }
    return;
  }
  QCustomPlot::mouseMoveEvent(event);
}

void ParallelCoordsPlot::mouseReleaseEvent(QMouseEvent* event) {
  if (m_dragAxis >= 0 && event->button() == Qt::LeftButton) {
    if (!m_dragged && m_model) {  // a click: the axis's brush goes
      m_model->clearBrush(static_cast<size_t>(m_dragAxis));
      refreshSelection();
      emit brushChanged();
    }
    m_dragAxis = -1;
    return;
  }
  QCustomPlot::mouseReleaseEvent(event);
}

}  // namespace lathe::ui
