// The HTML report document: head and style, header with the run facts (or the runs of a
// comparison), results at a glance, the metric summary table and the charts. Config, events and
// artifacts are in report_html_sections.cpp.
#include "widgets/report/report_html.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "widgets/common/cost_metrics.h"
#include "widgets/report/report_charts.h"
#include "widgets/report/report_events.h"
#include "widgets/report/report_groups.h"
#include "widgets/report/report_history.h"
#include "widgets/report/report_html_parts.h"
#include "widgets/report/report_stages.h"
#include "widgets/report/report_text.h"

namespace lathe::report {

namespace html {

Table::Table(std::string& out, const std::vector<std::string>& headers, const std::vector<bool>& numeric,
             const char* css_class)
    : m_out(out), m_numeric(numeric) {
  m_numeric.resize(headers.size(), false);
  m_out += std::string("<table class=\"") + css_class + "\" width=\"100%\" cellspacing=\"0\" cellpadding=\"4\">";
  m_out += "<thead><tr bgcolor=\"#e9eef3\">";
  for (size_t i = 0; i < headers.size(); ++i)
    m_out +=
        std::string(m_numeric[i] ? "<th class=\"num\" align=\"right\">" : "<th align=\"left\">") + headers[i] + "</th>";
  m_out += "</tr></thead><tbody>\n";
}

std::string Table::stripe() const { return m_rows % 2 ? " bgcolor=\"#f6f8fa\"" : ""; }

void Table::row(const std::vector<std::string>& cells, const std::string& tint) {
  m_out += "<tr" + (tint.empty() ? stripe() : " bgcolor=\"" + tint + "\"") + ">";
  for (size_t i = 0; i < cells.size(); ++i)
    m_out += std::string(i < m_numeric.size() && m_numeric[i] ? "<td class=\"num\" align=\"right\">" : "<td>") +
             cells[i] + "</td>";
  m_out += "</tr>\n";
  ++m_rows;
}

void Table::raw_row(const std::string& tr_markup) {
  m_out += tr_markup;
  ++m_rows;
}

void Table::close() {
  if (!m_closed)
    m_out += "</tbody></table>\n";
  m_closed = true;
}

Table::~Table() { close(); }

std::string esc(std::string_view text) { return html_escape(text); }

std::string section(const std::string& title) { return "<h2>" + esc(title) + "</h2>\n"; }

std::string swatch(size_t run_index) { return "<span style=\"color:" + run_color(run_index) + "\">&#9632;</span>"; }

std::string run_label_cell(const ReportData& data, size_t run_index) {
  if (!data.comparison())
    return esc(data.runs[run_index].label);
  return swatch(run_index) + "&nbsp;" + esc(data.runs[run_index].label);
}

}  // namespace html

namespace {

using html::esc;
using html::Table;

const char* kStandaloneStyle = R"CSS(
body { margin: 0; background: #eef1f4; color: #1d2733; font-size: 13px;
       font-family: "DejaVu Sans", "Segoe UI", "Helvetica Neue", Arial, sans-serif; }
.page { max-width: 1100px; margin: 24px auto; background: #fff; padding: 28px 36px 32px;
        border-radius: 6px; box-shadow: 0 1px 4px rgba(0, 0, 0, .12); }
h1 { font-size: 22px; font-weight: 600; margin: 0 0 4px 0; }
h2 { font-size: 12px; text-transform: uppercase; letter-spacing: .08em; color: #2b5d8a;
     border-bottom: 2px solid #2b5d8a; padding-bottom: 3px; margin: 28px 0 10px 0; }
h3 { font-size: 12px; color: #5b6775; margin: 14px 0 6px 0; font-weight: 600; }
.sub { color: #5b6775; font-size: 12px; margin: 0 0 14px 0; }
table { border-collapse: collapse; }
table.grid { font-size: 12px; }
table.grid th { font-weight: 600; color: #3b4754; border-bottom: 1px solid #c9d3dd; padding: 5px 8px; }
table.grid td { padding: 4px 8px; border-bottom: 1px solid #edf0f3; vertical-align: top; }
.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.key { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 11.5px; }
.mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 11px; word-break: break-all; }
.muted { color: #8a96a3; }
.badge { padding: 1px 8px; border-radius: 9px; color: #fff; font-size: 11px; font-weight: 600; }
table.cards { border-collapse: separate; border-spacing: 8px 0; margin: 0 -8px; width: calc(100% + 16px); }
table.cards td { padding: 10px 14px; border-left: 3px solid #2b5d8a; }
table + p.sub { margin-top: 6px; }
.card-value { font-size: 20px; font-weight: 600; }
.card-label { font-size: 11px; color: #5b6775; }
table.facts td { padding: 3px 8px; }
td.label { color: #5b6775; white-space: nowrap; }
.error { color: #8a1c1c; }
.best { font-weight: 600; }
table.charts td { padding: 6px 4px; }
.foot { margin-top: 28px; color: #8a96a3; font-size: 11px; }
)CSS";

// QTextDocument's subset: no box shadows, borders on cells are ignored; sizes in pt.
const char* kPrintStyle = R"CSS(
body { color: #1d2733; font-size: 8pt; font-family: "DejaVu Sans"; }
h1 { font-size: 15pt; font-weight: 600; margin-top: 0px; margin-bottom: 2px; }
h2 { font-size: 9.5pt; font-weight: 600; color: #2b5d8a; margin-top: 16px; margin-bottom: 5px; }
h3 { font-size: 8.5pt; font-weight: 600; color: #5b6775; margin-top: 8px; margin-bottom: 3px; }
.sub { color: #5b6775; font-size: 7.5pt; margin-bottom: 8px; }
table.grid { font-size: 7.5pt; }
th { font-weight: 600; color: #3b4754; }
.key { font-family: "DejaVu Sans Mono"; font-size: 7pt; }
.mono { font-family: "DejaVu Sans Mono"; font-size: 6.5pt; }
.muted { color: #8a96a3; }
.badge { color: #ffffff; font-weight: 600; font-size: 7.5pt; }
.card-value { font-size: 13pt; font-weight: 600; }
.card-label { font-size: 7pt; color: #5b6775; }
.label { color: #5b6775; }
.error { color: #8a1c1c; }
.best { font-weight: 600; }
.foot { color: #8a96a3; font-size: 7pt; margin-top: 14px; }
)CSS";

std::string status_badge(RunStatus status) {
  const char* color = "#757575";
  switch (status) {
    case RunStatus::finished:
      color = "#2e7d32";
      break;
    case RunStatus::running:
      color = "#1565c0";
      break;
    case RunStatus::failed:
      color = "#c62828";
      break;
    case RunStatus::cancelled:
      color = "#6d4c41";
      break;
    case RunStatus::interrupted:
    case RunStatus::incomplete:
      color = "#ef6c00";
      break;
    case RunStatus::queued:
      color = "#757575";
      break;
  }
  const std::string name(status_name(status));
  return std::string("<span class=\"badge\" style=\"background-color:") + color + "\">&nbsp;" + name + "&nbsp;</span>";
}

std::string time_or_dash(const std::optional<int64_t>& ms) { return ms ? format_local_time(*ms) : "-"; }

/// Backend, device and how many ranks and threads ran on it ("cpu / Xeon, 2 data-parallel ranks x 1 thread").
std::string backend_device(const ReportRun& r) {
  std::string s = esc(r.record.backend);
  if (!r.device.empty())
    s += (s.empty() ? "" : " / ") + esc(r.device);
  if (const std::string ranks = ranks_text(r); !ranks.empty())
    s += (s.empty() ? "" : ", ") + esc(ranks);
  return s.empty() ? "-" : s;
}

/// The instance and the price the run was costed at, with which price (spot or on-demand).
std::string price_text(const ReportRun& r) {
  if (r.instance.empty())
    return "-";
  std::string s = esc(r.instance);
  const std::string pricing = run_param(r, "cost.pricing");
  if (r.usd_per_hour)
    s += " (" + (pricing.empty() ? "" : esc(pricing) + " ") + esc(format_headline("cost/usd", *r.usd_per_hour)) + "/h)";
  return s;
}

std::string cost_text(const ReportRun& r) { return r.cost_usd ? esc(format_headline("cost/usd", *r.cost_usd)) : "-"; }

// ---- header ---------------------------------------------------------------------------------

/// What "best" means, under every table that bolds one (default_direction in engine/store).
const char* const kDirectionNote =
    "Lower is better for losses, bytes, params, FLOPs, memory, latency, time and cost; higher for accuracy, "
    "samples/s, throughput, speedup and MFU.";

// (dist/* only exist for a data-parallel run: a card is shown only for a metric the run logged.)
const char* const kHeadline[] = {"test/accuracy",     "test/loss", "train/samples_per_s",         "model/bytes",
                                 "device/mfu",        "cost/usd",  widgets::kUsdPerAccuracyPoint, "dist/world_size",
                                 "dist/comm_fraction"};

void write_cards(std::string& out, const ReportRun& run) {
  std::vector<std::pair<std::string, std::string>> cards;  // value, label
  const RunHistory history = run_history(run);
  for (const char* m : kHeadline) {
    const MetricSummary* s = run.summary(m);
    if (!s)
      continue;
    const std::string metric = m;
    std::string label = metric + " (last)";
    if (metric == "test/accuracy")
      label = "test/accuracy (last; best " + format_headline(m, s->best()) + ")";
    // Samples/s and MFU are per logging window: the last window's, beside the training phase's mean.
    if (metric == "train/samples_per_s" && history.samples_per_s_mean)
      label = metric + " (last window; mean " + format_headline(m, *history.samples_per_s_mean) + ")";
    if (metric == "device/mfu" && history.mfu_mean)
      label = metric + " (last window; mean " + format_headline(m, *history.mfu_mean) + ")";
    cards.emplace_back(format_headline(m, s->last), label);
  }
  if (cards.empty())
    return;
  out += "<table class=\"cards\" width=\"100%\" cellspacing=\"6\" cellpadding=\"8\"><tr>";
  for (const auto& [value, label] : cards)
    out += "<td bgcolor=\"#f1f5f9\"><div class=\"card-value\">" + esc(value) + "</div><div class=\"card-label\">" +
           esc(label) + "</div></td>";
  out += "</tr></table>\n";
}

std::string tags_text(const RunRecord& r) {
  std::string t;
  for (const std::string& tag : r.tags)
    t += (t.empty() ? "" : ", ") + tag;
  return t;
}

void write_run_facts(std::string& out, const ReportRun& r) {
  std::vector<std::pair<std::string, std::string>> facts = {
      {"Name", esc(r.record.name)},
      {"Run id", "<span class=\"key\">" + esc(r.record.id) + "</span>"},
      {"Status", status_badge(r.record.status)},
      {"Created", esc(format_local_time(r.record.created_ms))},
      {"Started", esc(time_or_dash(r.record.started_ms))},
      {"Finished", esc(time_or_dash(r.record.finished_ms))},
      {"Duration", esc(run_duration(r.record))},
      {"Backend / device", backend_device(r)},
      {"Instance", price_text(r)},
      {"Cost", cost_text(r) + (r.cost_usd ? " <span class=\"muted\">(the price x the run's wall time)</span>" : "") +
                   (r.cost_projection.empty() ? "" : " <b>Projected</b>: " + esc(r.cost_projection))},
      {"Host", esc(r.record.host.empty() ? "-" : r.record.host)},
      {"Lathe version", esc(r.record.code_version.empty() ? "-" : r.record.code_version)},
  };
  if (const std::string p = precision_text(r); !p.empty())
    facts.push_back({"Precision", esc(p)});
  const RunHistory history = run_history(r);
  if (history.samples_per_s_mean) {
    std::string mean = esc(format_headline("train/samples_per_s", *history.samples_per_s_mean));
    if (history.mfu_mean)
      mean += ", MFU " + esc(format_headline("device/mfu", *history.mfu_mean));
    mean += " <span class=\"muted\">(the training phase";
    if (history.segments.size() > 1)
      mean +=
          ", " + std::to_string(history.with_means) + " of " + std::to_string(history.segments.size()) + " segments";
    mean += ")</span>";
    facts.push_back({"Training mean", mean});
  }
  if (const std::string peak = mfu_peak_text(r); !peak.empty())
    facts.push_back({"MFU peak", esc(peak)});
  if (history.resumes() > 0)
    facts.push_back({"Resumed", esc(std::to_string(history.resumes()) + " time(s) from a checkpoint (Run history)")});
  if (!r.record.tags.empty() || !r.record.note.empty()) {
    facts.push_back({"Tags", esc(r.record.tags.empty() ? "-" : tags_text(r.record))});
    facts.push_back({"Note", esc(r.record.note.empty() ? "-" : r.record.note)});
  }
  out += "<table class=\"facts\" width=\"100%\" cellspacing=\"0\" cellpadding=\"3\">";
  for (size_t i = 0; i < facts.size(); i += 2) {
    out += "<tr>";
    for (size_t j = i; j < i + 2; ++j) {
      if (j < facts.size())
        out += "<td class=\"label\" width=\"15%\">" + facts[j].first + "</td><td width=\"35%\">" + facts[j].second +
               "</td>";
    }
    out += "</tr>\n";
  }
  out += "</table>\n";
  const std::string error = run_error(r.events);
  if (!error.empty())
    out += std::string("<table width=\"100%\" cellspacing=\"0\" cellpadding=\"8\"><tr><td bgcolor=\"") +
           html::kErrorTint + "\" class=\"error\"><b>Error:</b> " + esc(error) + "</td></tr></table>\n";
}

void write_runs_table(std::string& out, const ReportData& data) {
  out += html::section("Runs");
  Table t(out, {"Run", "Id", "Status", "Started", "Duration", "Backend / device", "Instance", "Cost"},
          {false, false, false, false, true, false, false, true});
  for (size_t i = 0; i < data.runs.size(); ++i) {
    const ReportRun& r = data.runs[i];
    const int resumes = run_history(r).resumes();
    t.row({html::run_label_cell(data, i), "<span class=\"key\">" + esc(r.record.id) + "</span>",
           status_badge(r.record.status) +
               (resumes > 0 ? " <span class=\"muted\">resumed " + std::to_string(resumes) + "x</span>" : ""),
           esc(time_or_dash(r.record.started_ms)), esc(run_duration(r.record)), backend_device(r), price_text(r),
           cost_text(r) + (r.cost_projection.empty() ? "" : " (projected)")});
  }
  t.close();
  for (size_t i = 0; i < data.runs.size(); ++i) {  // what was written about the runs
    const RunRecord& rec = data.runs[i].record;
    if (!rec.tags.empty() || !rec.note.empty())
      out += "<p class=\"sub\">" + html::swatch(i) + " <b>" + esc(data.runs[i].label) + "</b>" +
             (rec.tags.empty() ? "" : " [" + esc(tags_text(rec)) + "]") +
             (rec.note.empty() ? "" : ": " + esc(rec.note)) + "</p>\n";
  }
  for (size_t i = 0; i < data.runs.size(); ++i) {
    const std::string error = run_error(data.runs[i].events);
    if (!error.empty())
      out += std::string("<p class=\"error\">") + html::swatch(i) + " <b>" + esc(data.runs[i].label) + " failed:</b> " +
             esc(error) + "</p>\n";
  }
}

/// Which run has the best value of `metric` (by its direction); -1 when fewer than two have it.
int best_run(const ReportData& data, const std::string& metric, bool use_last) {
  int best = -1, with_metric = 0;
  double best_value = NAN;
  for (size_t i = 0; i < data.runs.size(); ++i) {
    const MetricSummary* s = data.runs[i].summary(metric);
    if (!s)
      continue;
    ++with_metric;
    const double v = use_last ? s->last : s->best();
    if (std::isnan(v))
      continue;
    const bool better = s->direction == Direction::minimize ? v < best_value : v > best_value;
    if (best < 0 || better) {
      best = static_cast<int>(i);
      best_value = v;
    }
  }
  if (with_metric < 2 || best < 0)
    return -1;
  // A tie everywhere has no winner.
  for (const ReportRun& r : data.runs) {
    const MetricSummary* s = r.summary(metric);
    if (s && (use_last ? s->last : s->best()) != best_value)
      return best;
  }
  return -1;
}

/// The headline metrics, then every latency the runs measured (dense, pruned, f32, int8 ...).
std::vector<std::string> glance_metrics(const ReportData& data) {
  std::vector<std::string> out(std::begin(kHeadline), std::end(kHeadline));
  out.insert(std::find(out.begin(), out.end(), std::string(widgets::kUsdPerAccuracyPoint)),
             widgets::kUsdPerRun);  // $ per run, then $ per accuracy point
  for (const std::string& m : data.metrics)
    if (m.rfind("latency/", 0) == 0 && m.size() > 3 && m.compare(m.size() - 3, 3, "_ms") == 0)
      out.push_back(m);
  return out;
}

void write_glance(std::string& out, const ReportData& data) {
  std::vector<std::string> headers{"Metric (last value)"};
  std::vector<bool> numeric{false};
  for (size_t i = 0; i < data.runs.size(); ++i) {
    headers.push_back(html::run_label_cell(data, i));
    numeric.push_back(true);
  }
  out += html::section("Results at a glance");
  Table t(out, headers, numeric);
  for (const std::string& m : glance_metrics(data)) {
    const int best = best_run(data, m, true);
    std::vector<std::string> cells{"<span class=\"key\">" + esc(m) + "</span>"};
    bool any = false;
    for (size_t i = 0; i < data.runs.size(); ++i) {
      const MetricSummary* s = data.runs[i].summary(m);
      any = any || s;
      const std::string v = s ? esc(format_value(s->last)) : "<span class=\"muted\">-</span>";
      cells.push_back(static_cast<int>(i) == best ? "<b>" + v + "</b>" : v);
    }
    if (any)
      t.row(cells);
  }
  // The training phase's means (over every segment of a resumed run): the rows above are the last
  // logging window's, which a short or disturbed last window can move far.
  std::vector<RunHistory> histories;
  for (const ReportRun& r : data.runs)
    histories.push_back(run_history(r));
  const auto mean_row = [&](const std::string& label, std::optional<double> RunHistory::*field) {
    std::vector<std::string> cells{"<span class=\"key\">" + esc(label) + "</span>"};
    int best = -1, with = 0;
    for (size_t i = 0; i < histories.size(); ++i)
      if (const std::optional<double>& v = histories[i].*field) {
        ++with;
        if (best < 0 || *v > *(histories[static_cast<size_t>(best)].*field))
          best = static_cast<int>(i);
      }
    if (with == 0)
      return;
    for (size_t i = 0; i < histories.size(); ++i) {
      const std::optional<double>& v = histories[i].*field;
      const std::string text = v ? esc(format_value(*v)) : "<span class=\"muted\">-</span>";
      cells.push_back(with > 1 && static_cast<int>(i) == best ? "<b>" + text + "</b>" : text);
    }
    t.row(cells);
  };
  mean_row("train/samples_per_s (training mean)", &RunHistory::samples_per_s_mean);
  mean_row("device/mfu (training mean)", &RunHistory::mfu_mean);
  t.close();
  // MFU over a bf16 peak and over an f32 peak are not the same scale.
  std::string dtypes, first_dtype;
  bool mixed = false;
  for (const ReportRun& r : data.runs) {
    const std::string d = mfu_peak_dtype(r);
    if (d.empty() || !r.summary("device/mfu"))
      continue;
    mixed = mixed || (!first_dtype.empty() && d != first_dtype);
    if (first_dtype.empty())
      first_dtype = d;
    dtypes += (dtypes.empty() ? "" : ", ") + esc(r.label) + ": " + esc(d);
  }
  if (mixed)
    out += "<p class=\"sub error\">device/mfu is over each run's own peak, of different data types (" + dtypes +
           "): not comparable across them.</p>\n";
  out += std::string(
             "<p class=\"sub\">Bold: the best run for that metric. Samples/s and MFU rows without "
             "\"mean\" are the last logging window's. ") +
         kDirectionNote + "</p>\n";
}

// ---- metric summary ---------------------------------------------------------------------------

std::string stat_cells(const MetricSummary& s, bool bold_best) {
  auto td = [](const std::string& v) { return "<td class=\"num\" align=\"right\">" + v + "</td>"; };
  const std::string best = esc(format_value(s.best()));
  return td(esc(format_value(s.last))) + td(bold_best ? "<b>" + best + "</b>" : best) +
         td(esc(std::to_string(s.best_step()))) + td(esc(format_value(s.min))) + td(esc(format_value(s.max))) +
         td(esc(std::to_string(s.count)));
}

/// What device/util measures on a CPU, which its name does not say (a 1-thread run on 2 cores
/// reads at most 0.5 while each rank's dist/rank<i>/util reads 1).
std::string cpu_util_note(const ReportData& data) {
  for (const ReportRun& r : data.runs)
    if (r.record.backend == "cpu" && r.summary("device/util"))
      return " device/util on a CPU: this process's CPU time over all the machine's usable cores, not over its own "
             "threads; dist/rank&lt;i&gt;/util: each rank's over its own threads.";
  return "";
}

void write_metric_summary(std::string& out, const ReportData& data) {
  out += html::section("Metric summary");
  if (data.metrics.empty()) {
    out += "<p class=\"muted\">No metrics were recorded.</p>\n";
    return;
  }
  const std::vector<std::string> stats{"Last", "Best", "Best at step", "Min", "Max", "Samples"};
  auto unit_cell = [](const std::string& m) { return "<td class=\"muted\">" + esc(default_unit(m)) + "</td>"; };
  if (!data.comparison()) {
    std::vector<std::string> headers{"Metric", "Unit"};
    headers.insert(headers.end(), stats.begin(), stats.end());
    Table t(out, headers, {false, false, true, true, true, true, true, true});
    for (const std::string& m : data.metrics) {
      const MetricSummary* s = data.runs[0].summary(m);
      t.raw_row("<tr" + t.stripe() + "><td class=\"key\">" + esc(m) + "</td>" + unit_cell(m) + stat_cells(*s, false) +
                "</tr>\n");
    }
    t.close();
    if (const std::string note = cpu_util_note(data); !note.empty())
      out += "<p class=\"sub\">" + note.substr(1) + "</p>\n";
    return;
  }
  std::vector<std::string> headers{"Metric", "Unit", "Run"};
  headers.insert(headers.end(), stats.begin(), stats.end());
  Table t(out, headers, {false, false, false, true, true, true, true, true, true});
  for (const std::string& m : data.metrics) {
    std::vector<size_t> with;
    for (size_t i = 0; i < data.runs.size(); ++i)
      if (data.runs[i].summary(m))
        with.push_back(i);
    const int best = best_run(data, m, false);
    const std::string stripe = t.stripe();
    std::string rows;
    for (size_t k = 0; k < with.size(); ++k) {
      const size_t i = with[k];
      rows += "<tr" + stripe + ">";
      if (k == 0)
        rows += "<td class=\"key\" rowspan=\"" + std::to_string(with.size()) + "\">" + esc(m) + "</td>" +
                "<td class=\"muted\" rowspan=\"" + std::to_string(with.size()) + "\">" + esc(default_unit(m)) + "</td>";
      rows += "<td>" + html::run_label_cell(data, i) + "</td>" +
              stat_cells(*data.runs[i].summary(m), static_cast<int>(i) == best) + "</tr>\n";
    }
    t.raw_row(rows);
  }
  t.close();
  out += std::string("<p class=\"sub\">Best: the minimum or the maximum, by the metric's direction. ") + kDirectionNote;
  out += " Bold: the best run." + cpu_util_note(data) + "</p>\n";
}

// ---- charts -----------------------------------------------------------------------------------

void write_charts(std::string& out, const ReportData& data, const std::vector<ChartImage>& charts, HtmlFlavor flavor,
                  const std::string& title = "Charts") {
  if (charts.empty())
    return;
  out += html::section(title);
  out += "<table class=\"charts\" width=\"100%\" cellspacing=\"0\" cellpadding=\"2\">";
  for (size_t i = 0; i < charts.size(); ++i) {
    const ChartImage& c = charts[i];
    if (i % 2 == 0)
      out += "<tr>";
    const std::string src = flavor == HtmlFlavor::standalone ? "data:image/png;base64," + c.png.toBase64().toStdString()
                                                             : chart_resource_name(i);
    out += "<td align=\"center\"><img src=\"" + src + "\" width=\"" + std::to_string(c.width) + "\" height=\"" +
           std::to_string(c.height) + "\" alt=\"" + esc(c.metric) + "\"></td>";
    if (i % 2 == 1 || i + 1 == charts.size())
      out += "</tr>\n";
  }
  out += "</table>\n";
  out += "<p class=\"sub\">x axis: training step. Long series are drawn from min/max-preserving buckets (" +
         std::to_string(kChartBuckets) + " per series), so no spike is lost.";
  if (title != "Charts")
    out +=
        " Each line: a group's mean over its members at each step; the band: mean &plusmn; the sample std (ddof=1)"
        " of the members present at that step.";
  else if (data.comparison())
    out += " Colors as in the Runs table.";
  else if (!chart_markers(data.runs[0]).empty())
    out += " Dashed lines: where a training stage starts (named) or the run resumed from a checkpoint.";
  out += "</p>\n";
}

}  // namespace

std::string chart_resource_name(size_t index) { return "lathe-chart-" + std::to_string(index) + ".png"; }

std::string report_title(const ReportData& data) {
  if (data.comparison())
    return "Comparison of " + std::to_string(data.runs.size()) + " runs";
  return "Run report: " + (data.runs[0].record.name.empty() ? data.runs[0].record.id : data.runs[0].record.name);
}

std::vector<ChartImage> render_report_charts(const ReportData& data, HtmlFlavor flavor) {
  const bool print = flavor == HtmlFlavor::print;
  const int width = print ? 335 : 530, height = print ? 205 : 290;
  const double scale = print ? 3.0 : 2.0;
  std::vector<ChartImage> charts;
  for (const ChartGroup& group : chart_groups(data.charted)) {
    ChartSpec spec;
    spec.title = group.title;
    spec.y_label = default_unit(group.title);  // "dist/rank*/samples_per_s" reads as its ranks do
    spec.legend = data.comparison() || group.metrics.size() > 1;
    for (size_t i = 0; i < data.runs.size(); ++i)
      for (size_t k = 0; k < group.metrics.size(); ++k) {
        auto it = data.runs[i].series.find(group.metrics[k]);
        if (it == data.runs[i].series.end())
          continue;
        // One run: a color per rank; a comparison: the run's color for its first rank, then the next ones.
        const std::string label = group.parts[k].empty() ? data.runs[i].label
                                  : data.comparison()    ? data.runs[i].label + " " + group.parts[k]
                                                         : group.parts[k];
        spec.lines.push_back({label, run_color(data.comparison() ? i + k * data.runs.size() : k), &it->second});
      }
    if (!data.comparison())  // a comparison's runs have their stages at different steps
      for (const auto& [step, label] : chart_markers(data.runs[0]))
        spec.markers.push_back({step, label});
    const std::string metric = group.title;
    // A comparison chart is taller when its legend needs more than one row (1-3 entries a row, by
    // the longest run label: labels wrap to more rows, never cut).
    std::vector<std::string> labels;
    for (const ChartLine& line : spec.lines)
      labels.push_back(line.label);
    const int legend_rows = spec.legend ? legend_lines(labels, width) : 0;
    const int h = height + legend_rows * (print ? 12 : 16);
    charts.push_back({metric, render_chart_png(spec, width, h, scale), width, h});
  }
  return charts;
}

std::string build_report_html(const ReportData& data, const std::vector<ChartImage>& charts, HtmlFlavor flavor) {
  const bool standalone = flavor == HtmlFlavor::standalone;
  std::string out;
  out.reserve(64 * 1024);
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += "<meta name=\"generator\" content=\"Lathe lathe_report\">\n";
  out += "<title>" + esc(report_title(data)) + "</title>\n<style>";
  out += standalone ? kStandaloneStyle : kPrintStyle;
  out += "</style></head>\n<body>\n";
  if (standalone)
    out += "<div class=\"page\">\n";
  out += "<h1>" + esc(report_title(data)) + "</h1>\n";
  out += "<p class=\"sub\">Generated " + esc(format_local_time(data.generated_ms)) + " from the run store " +
         esc(data.store_path) + "</p>\n";
  if (data.comparison()) {
    write_runs_table(out, data);
    write_glance(out, data);
  } else {
    write_cards(out, data.runs[0]);
    out += html::section("Run");
    write_run_facts(out, data.runs[0]);
    html::write_stage_results(out, data.runs[0]);
    html::write_history(out, data.runs[0]);
  }
  write_groups(out, data);
  write_metric_summary(out, data);
  if (standalone && !data.group_by.empty())  // the PDF has the groups table, not their charts
    write_charts(out, data, render_group_charts(data, flavor), flavor, "Group charts");
  write_charts(out, data, charts, flavor);
  html::write_provenance(out, data);
  html::write_config(out, data, !standalone && !charts.empty());
  html::write_events(out, data);
  html::write_artifacts(out, data);
  out +=
      "<p class=\"foot\">Lathe run report &middot; values as recorded in the store; every sample is in the CSV "
      "report (lathe-cli report --format csv).</p>\n";
  if (standalone)
    out += "</div>\n";
  out += "</body></html>\n";
  return out;
}

}  // namespace lathe::report
