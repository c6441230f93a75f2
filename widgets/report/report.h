// Reports of runs from the store: one run -> a run report, two or more -> a comparison report,
// as self-contained HTML (charts embedded as base64 PNG), PDF (the same content) or CSV (every
// sample of every metric of every run). Used by the desktop app's Export action and by
// `lathe-cli report`.
#pragma once

#include <string>
#include <vector>

#include "engine/analysis/run_groups.h"
#include "engine/store/store.h"

namespace lathe::report {

enum class Format { html, pdf, csv };

/// "html" | "pdf" | "csv" (case-insensitive). ConfigError naming "--format" and the allowed values.
Format parse_format(const std::string& text);
/// The canonical spelling ("html", "pdf", "csv"), also the usual file extension.
std::string format_name(Format format);

/// One run -> a run report; 2+ runs -> a comparison report. Needs a QGuiApplication/QApplication to
/// exist for html/pdf (charts are rendered with QCustomPlot); csv needs none. Throws lathe::Error
/// with context (DataError for an unknown run or an unwritable path).
/// `group_by` (html/pdf): the runs also folded into groups (a Groups section with mean ± sample std;
/// in HTML, group charts with std bands).
void write_report(const Store& store, const std::vector<std::string>& run_ids, Format format, const std::string& path,
                  const GroupBy* group_by = nullptr);

}  // namespace lathe::report
