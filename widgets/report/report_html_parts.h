// Internal to the HTML report: the markup helpers and the section writers shared by
// report_html.cpp (header, runs, metrics, charts) and report_html_sections.cpp (config, events,
// artifacts).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "widgets/report/report_data.h"
#include "widgets/report/report_html.h"

namespace lathe::report::html {

/// A table with a header row; `numeric[i]` right-aligns column i. Rows alternate a light tint
/// (zebra stripes work in browsers and in QTextDocument alike).
class Table {
 public:
  Table(std::string& out, const std::vector<std::string>& headers, const std::vector<bool>& numeric,
        const char* css_class = "grid");
  /// Appends one row of already-escaped cells; `tint` overrides the stripe ("" = stripe).
  void row(const std::vector<std::string>& cells, const std::string& tint = "");
  /// Appends raw `<tr>...</tr>` markup (for rowspans); counts as a row for the stripes.
  void raw_row(const std::string& tr_markup);
  std::string stripe() const;  ///< the bgcolor attribute of the next row ("" or ` bgcolor="..."`)
  void close();
  ~Table();

 private:
  std::string& m_out;
  std::vector<bool> m_numeric;
  int m_rows = 0;
  bool m_closed = false;
};

std::string esc(std::string_view text);
std::string section(const std::string& title);  ///< an <h2>
std::string swatch(size_t run_index);           ///< a small square in the run's chart color
std::string run_label_cell(const ReportData& data, size_t run_index);

constexpr const char* kChangedTint = "#fff3cd";
constexpr const char* kErrorTint = "#fdecea";

/// `new_page`: start on a new page (print flavor, after the charts).
void write_config(std::string& out, const ReportData& data, bool new_page);
void write_events(std::string& out, const ReportData& data);
void write_artifacts(std::string& out, const ReportData& data);
/// Where each run's model came from (the imported ONNX file and its sha256, from the run's
/// model_source event, or the zoo/config model) and where it went (the model files the run wrote:
/// weights and ONNX exports, each with the sha256 the store recorded).
void write_provenance(std::string& out, const ReportData& data);

}  // namespace lathe::report::html
