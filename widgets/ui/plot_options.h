// PlotOptions: the view options every chart offers (issue 17 item 5) and what carries them out on
// a QCustomPlot: log x / log y axes (QCPAxisTickerLog; points a log axis cannot show, <= 0, are
// left out and counted so the chart can say so), an auto or fixed y range, and export of exactly
// what the chart shows to PNG (savePng at the widget's size) or SVG (QSvgGenerator). The context
// menu of LiveChart, the compare view's Curves and Scatter tabs all build theirs with
// addPlotOptionsActions, so the options read and behave the same everywhere.
#pragma once

#include <qcustomplot.h>
#include <QMenu>
#include <QString>
#include <QVector>
#include <functional>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe::ui {

struct PlotOptions {
  bool logX = false;
  bool logY = false;
  bool fixedY = false;  ///< false: the y range follows the data
  double yMin = 0, yMax = 1;
  bool operator==(const PlotOptions&) const = default;
};

/// Sets each axis to linear or logarithmic (with a log ticker; a linear ticker back), and the y
/// range when it is fixed. Refuses a fixed range that is empty, not finite, or not > 0 on a log
/// axis (std::invalid_argument naming the field and what is allowed).
void applyPlotOptions(QCustomPlot* plot, const PlotOptions& options);

/// Widens an axis's range by `fraction` of its span on each side (on a log axis, of its span in
/// decades, so it never reaches 0); a range of zero span gets a small band around its value.
void padAxis(QCPAxis* axis, double fraction);

/// Drops the pairs a log axis cannot show (x <= 0 on log x, y <= 0 on log y, NaN either way) from
/// `x`/`y` in place; returns how many were dropped.
int dropUnplottable(QVector<double>& x, QVector<double>& y, bool logX, bool logY);

/// "3 points <= 0 not shown on the log axis" (empty for 0): the note a chart puts in its corner.
QString hiddenPointsNote(int hidden);

/// Puts hiddenPointsNote(hidden) in the plot's bottom-right corner (nothing for 0); the item goes
/// with the plot's next clearItems().
void addHiddenNote(QCustomPlot* plot, int hidden);

/// Writes the plot as it is on screen, at the widget's size, to a PNG / an SVG file. Throws
/// std::runtime_error naming the file when it cannot be written.
void exportPng(QCustomPlot* plot, const QString& path);
void exportSvg(QCustomPlot* plot, const QString& path);

/// Adds "Log x axis", "Log y axis", "Auto y range", "Fixed y range...", "Export PNG...", "Export
/// SVG..." to `menu`. `apply` gets the changed options; the dialogs are parented to `plot`.
void addPlotOptionsActions(QMenu* menu, QCustomPlot* plot, const PlotOptions& current,
                           const std::function<void(const PlotOptions&)>& apply);

/// Metric-vs-metric samples: for every y sample, the x metric's value at the same step, or (when
/// the x metric was not logged at that step) its last value logged before it. y samples before the
/// first x sample, and NaN pairs, are left out. Both inputs are in step order. Returns (x, y) pairs
/// in the y samples' step order.
std::vector<std::pair<double, double>> pairByStep(const std::vector<Point>& xSeries, const std::vector<Point>& ySeries);

}  // namespace lathe::ui
