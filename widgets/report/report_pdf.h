// The PDF report: the print flavor of the HTML laid out by QTextDocument on A4 pages through
// QPdfWriter, with a running header (the title) and footer (page x of n) on every page.
#pragma once

#include <QByteArray>

#include "widgets/report/report_data.h"

namespace lathe::report {

/// The PDF file's bytes. Needs a QApplication on this thread (the charts).
QByteArray render_report_pdf(const ReportData& data);

}  // namespace lathe::report
