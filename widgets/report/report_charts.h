// Chart images of the report: one metric, one line per run (overlaid for a comparison), drawn
// with QCustomPlot off screen and returned as PNG bytes. Needs a QApplication on this thread.
#pragma once

#include <QByteArray>
#include <string>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe::report {

struct ChartLine {
  std::string label;  ///< legend text
  std::string color;  ///< "#rrggbb"
  const std::vector<Point>* points = nullptr;
  /// A band drawn under the line in its color (a group's mean - std .. mean + std, or min .. max):
  /// both set, at the same steps as `points`.
  const std::vector<Point>* band_lo = nullptr;
  const std::vector<Point>* band_hi = nullptr;
};

/// A vertical dashed line at a step with a label at its top (a stage's start, a resume).
struct ChartMarker {
  double step = 0;
  std::string label;
};

struct ChartSpec {
  std::string title;  ///< the metric name
  std::string x_label = "step";
  std::string y_label;  ///< the values' unit (default_unit), "" for none
  std::vector<ChartLine> lines;
  bool legend = false;               ///< a legend row under the plot (comparisons)
  std::vector<ChartMarker> markers;  ///< drawn where they fall inside the x range
};

/// The color of the index-th run (Tableau 10, repeating), also used for the runs' swatches.
std::string run_color(size_t index);

/// `label` broken into lines ("\n") at spaces so that each fits a legend entry of a chart `width`
/// pixels wide (a word longer than that stays whole).
std::string wrap_legend_label(const std::string& label, int width);

/// How many legend entries fit side by side in `width` logical pixels (1 to 3): every label is
/// shown whole, so long run names take a row each instead of being cut at the chart's edge.
int legend_columns(const std::vector<std::string>& labels, int width);

/// Text lines the legend of these labels takes in a chart `width` pixels wide (rows of
/// legend_columns() entries, each as tall as its most wrapped label).
int legend_lines(const std::vector<std::string>& labels, int width);

/// Renders the chart at width x height logical pixels, `scale` times as many device pixels (2 for
/// crisp print), as PNG. lathe::Error when there is no QApplication or it is not this thread's.
QByteArray render_chart_png(const ChartSpec& spec, int width, int height, double scale);

/// Throws lathe::Error saying what to do when Qt widgets cannot be used here (no QApplication, or
/// called off the GUI thread).
void require_widget_application(const char* what);

}  // namespace lathe::report
