// The HTML of a run or comparison report. Two flavors of the same content: `standalone` (the
// .html file: charts inline as data:image/png;base64 URIs, nothing external) and `print` (the
// source of the PDF: charts referenced by resource name, sized for an A4 page, and only the HTML
// subset QTextDocument understands).
#pragma once

#include <QByteArray>
#include <string>
#include <vector>

#include "widgets/report/report_data.h"

namespace lathe::report {

enum class HtmlFlavor { standalone, print };

struct ChartImage {
  std::string metric;
  QByteArray png;
  int width = 0, height = 0;  ///< display size in CSS pixels
};

/// One chart per entry of data.charted, one line per run that has the metric, sized for `flavor`.
/// Needs a QApplication (report_charts.h).
std::vector<ChartImage> render_report_charts(const ReportData& data, HtmlFlavor flavor);

/// The resource name of the index-th chart in the print flavor (added to the QTextDocument).
std::string chart_resource_name(size_t index);

/// The whole document.
std::string build_report_html(const ReportData& data, const std::vector<ChartImage>& charts, HtmlFlavor flavor);

/// The report's title: "Run report: NAME" or "Comparison of N runs".
std::string report_title(const ReportData& data);

}  // namespace lathe::report
