// ParallelCoordsPlot: draws a ParallelCoordsModel with QCustomPlot and brushes it with the mouse.
// Thousands of runs stay interactive because lines are not one plottable per run (QCPCurve per
// run, or even a few QCPCurves with NaN breaks, cost ~100 ms a frame at 10,000 runs): one
// layerable (ParallelLines) draws every run's segments with a single QPainter::drawLines per
// group — grey for the runs outside the brushes, one group per colour bucket (by the value on
// the last axis) for the runs inside, and one on top for the runs selected in the run table. Dragging along an axis
// brushes it (a band of the axis); a click on an axis without dragging clears its brush; the
// clicked axis becomes the current one (what Move left / right and Log act on).
#pragma once

#include <qcustomplot.h>
#include <vector>

#include "widgets/ui/parallel_coords_model.h"

namespace lathe::ui {

class ParallelLines;

class ParallelCoordsPlot : public QCustomPlot {
  Q_OBJECT
 public:
  /// Colour buckets of the lines inside the brushes.
  static constexpr int kBuckets = 6;

  explicit ParallelCoordsPlot(QWidget* parent = nullptr);
  /// The model drawn (not owned); call rebuild() after its runs or axes change.
  void setModel(ParallelCoordsModel* model) { m_model = model; }
  /// Axes, their labels and every line, from the model.
  void rebuild();
  /// The lines and brush bands after a brush changed (cheaper than rebuild: no axis items).
  void refreshSelection();
  /// Runs drawn on top, bold (the run table's selection).
  void setHighlighted(const std::vector<size_t>& runs);
  int currentAxis() const { return m_current; }
  void setCurrentAxis(int axis);
  /// Brushes `axis` from normalised t0 to t1 as a mouse drag would (and emits brushChanged).
  void brushAxis(int axis, double t0, double t1);
  /// The axis under a pixel x (within a fifth of the axis spacing), or -1.
  int axisAtPixel(double x) const;
  /// Line groups: [0] outside the brushes, [1..kBuckets] inside by colour bucket, [kBuckets + 1]
  /// highlighted (drawn in that order). Runs in a group, and the segments drawn for it (a segment
  /// joins two neighbouring axes where the run has both values).
  int runsIn(int group) const;
  int segmentsIn(int group) const;

 signals:
  void brushChanged();
  void currentAxisChanged(int axis);
  /// Right-click on an axis (the panel shows its menu).
  void axisMenuRequested(int axis, const QPoint& globalPos);

 protected:
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;

 private:
  void fillGroups();
  void placeAxisItems();
  void placeBrushItems();
  double tAtPixel(double y) const;
  ParallelCoordsModel* m_model = nullptr;
  ParallelLines* m_lines = nullptr;
  std::vector<size_t> m_highlighted;
  std::vector<QCPAbstractItem*> m_axisItems, m_brushItems;
  int m_current = -1;
  int m_dragAxis = -1;
  double m_dragFrom = 0;
  bool m_dragged = false;
};

}  // namespace lathe::ui
