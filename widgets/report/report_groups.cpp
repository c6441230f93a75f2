// Groups in the reports (see report_groups.h).
#include "widgets/report/report_groups.h"

#include <map>

#include "engine/analysis/group_series.h"
#include "widgets/report/report_charts.h"
#include "widgets/report/report_html_parts.h"
#include "widgets/report/report_text.h"

namespace lathe::report {

using html::esc;

void add_groups(ReportData& data, const GroupBy& by) {
  std::vector<RunFacts> facts;
  for (const ReportRun& r : data.runs)
    facts.push_back({r.record.id, r.params, r.summaries});
  data.groups = group_runs(facts, by);
  data.group_by = by.describe();
}

void write_groups(std::string& out, const ReportData& data) {
  if (data.group_by.empty())
    return;
  out += html::section("Groups");
  out += "<p class=\"sub\">" + std::to_string(data.groups.size()) + " group(s) of " + std::to_string(data.runs.size()) +
         " runs by " + esc(data.group_by) +
         ". Each cell: the mean &plusmn; the sample standard deviation (ddof=1, as numpy.std(x, ddof=1)) of the "
         "members' last values, and n, the members that have the metric. Headline metrics and latencies; every "
         "metric: lathe-cli compare --group.</p>\n";
  // The headline metrics and the measured latencies (a table of every metric would be dozens of
  // columns wide: `lathe-cli compare --group` lists them all).
  const auto headline = [](const std::string& m) {
    for (const char* h : {"test/accuracy", "test/loss", "train/loss", "model/bytes", "train/samples_per_s", "cost/usd"})
      if (m == h)
        return true;
    return m.rfind("latency/", 0) == 0 &&
           (m.find("/b1_ms") != std::string::npos || m.find("/b256_ms") != std::string::npos);
  };
  std::vector<std::string> names;
  for (const std::string& m : data.metrics)
    for (const RunGroup& g : data.groups)
      if (headline(m) && g.metric(m)) {
        names.push_back(m);
        break;
      }
  std::vector<std::string> headers{"Group", "Runs"};
  std::vector<bool> numeric{false, false};
  for (const std::string& m : names) {
    headers.push_back(esc(m));
    numeric.push_back(true);
  }
  html::Table t(out, headers, numeric);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < data.runs.size(); ++i)
    index[data.runs[i].record.id] = i;
  for (const RunGroup& g : data.groups) {
    std::string members;
    for (const std::string& id : g.run_ids)
      members += html::swatch(index[id]) + " " + esc(data.runs[index[id]].label) + "<br>";
    std::vector<std::string> cells{"<span class=\"key\">" + esc(g.label) + "</span>", members};
    for (const std::string& m : names) {
      const GroupMetric* gm = g.metric(m);
      cells.push_back(gm ? esc(format_spread(gm->last)) : "<span class=\"muted\">-</span>");
    }
    t.row(cells);
  }
}

std::vector<ChartImage> render_group_charts(const ReportData& data, HtmlFlavor flavor) {
  std::vector<ChartImage> charts;
  if (data.group_by.empty())
    return charts;
  const bool print = flavor == HtmlFlavor::print;
  const int width = print ? 335 : 530, height = print ? 205 : 290;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < data.runs.size(); ++i)
    index[data.runs[i].record.id] = i;
  for (const std::string& metric : data.charted) {
    // Per group: mean, mean - std and mean + std at every step the members' chart points have.
    std::vector<std::vector<Point>> mean(data.groups.size()), lo(data.groups.size()), hi(data.groups.size());
    ChartSpec spec;
    spec.title = metric + " (group mean \u00b1 std)";
    spec.y_label = default_unit(metric);
    spec.legend = true;
    for (size_t g = 0; g < data.groups.size(); ++g) {
      std::vector<std::vector<Point>> members;
      for (const std::string& id : data.groups[g].run_ids) {
        auto it = data.runs[index[id]].series.find(metric);
        if (it != data.runs[index[id]].series.end())
          members.push_back(it->second);
      }
      if (members.empty())
        continue;
      for (const GroupPoint& p : group_series(members)) {
        const double sd = p.spread.n >= 2 ? p.spread.std : 0.0;
        mean[g].push_back({p.step, 0, p.spread.mean});
        lo[g].push_back({p.step, 0, p.spread.mean - sd});
        hi[g].push_back({p.step, 0, p.spread.mean + sd});
      }
      spec.lines.push_back({data.groups[g].label + " (n=" + std::to_string(data.groups[g].run_ids.size()) + ")",
                            run_color(g), &mean[g], &lo[g], &hi[g]});
    }
    if (spec.lines.empty())
      continue;
    std::vector<std::string> labels;
    for (const ChartLine& line : spec.lines)
      labels.push_back(line.label);
    const int h = height + legend_lines(labels, width) * (print ? 12 : 16);
    charts.push_back({metric, render_chart_png(spec, width, h, print ? 3.0 : 2.0), width, h});
  }
  return charts;
}

}  // namespace lathe::report
