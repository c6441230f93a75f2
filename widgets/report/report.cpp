// write_report: resolves the runs, opens the output (so a bad path fails before any work), and
// writes the requested format (see report.h).
#include "widgets/report/report.h"

#include <algorithm>
#include <cctype>

#include "engine/core/error.h"
#include "widgets/report/output_file.h"
#include "widgets/report/report_charts.h"
#include "widgets/report/report_csv.h"
#include "widgets/report/report_data.h"
#include "widgets/report/report_groups.h"
#include "widgets/report/report_html.h"
#include "widgets/report/report_pdf.h"

namespace lathe::report {

Format parse_format(const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "html")
    return Format::html;
  if (t == "pdf")
    return Format::pdf;
  if (t == "csv")
    return Format::csv;
  throw ConfigError("--format: \"" + text + "\" is not a report format; allowed: html, pdf, csv");
}

std::string format_name(Format format) {
  switch (format) {
    case Format::html:
      return "html";
    case Format::pdf:
      return "pdf";
    case Format::csv:
      return "csv";
  }
  return "?";
}

void write_report(const Store& store, const std::vector<std::string>& run_ids, Format format, const std::string& path,
                  const GroupBy* group_by) {
  if (format != Format::csv)
    require_widget_application(format == Format::html ? "an html report" : "a pdf report");
  OutputFile out(path);
  if (format == Format::csv) {
    write_samples_csv(store, resolve_report_runs(store, run_ids), out.stream());
  } else {
    ReportData data = collect_report_data(store, run_ids);
    if (group_by)
      add_groups(data, *group_by);
    if (format == Format::html) {
      const std::vector<ChartImage> charts = render_report_charts(data, HtmlFlavor::standalone);
      out.write(build_report_html(data, charts, HtmlFlavor::standalone));
    } else {
      const QByteArray pdf = render_report_pdf(data);
      out.write(std::string_view(pdf.constData(), static_cast<size_t>(pdf.size())));
    }
  }
  out.commit();
}

}  // namespace lathe::report
