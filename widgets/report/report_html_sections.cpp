// The HTML report's config, events and artifacts sections. A comparison shows the config side by
// side: first the keys that differ (the cells unlike the first run's marked), then the keys that
// are the same everywhere, grouped by section.
#include <algorithm>
#include <map>
#include <set>

#include "engine/store/provenance.h"
#include "widgets/report/report_events.h"
#include "widgets/report/report_html_parts.h"
#include "widgets/report/report_text.h"

namespace lathe::report::html {

namespace {

/// "train.lr" -> ("train", "lr"); "seed" -> ("general", "seed").
std::pair<std::string, std::string> split_key(const std::string& key) {
  const auto dot = key.find('.');
  if (dot == std::string::npos)
    return {"general", key};
  return {key.substr(0, dot), key.substr(dot + 1)};
}

std::string value_cell(const std::string& value) {
  return value.empty() ? "<span class=\"muted\">(empty)</span>" : "<span class=\"key\">" + esc(value) + "</span>";
}

/// key = value rows grouped by section (a header row each), two settings side by side per row.
void write_grouped(std::string& out, const std::vector<std::pair<std::string, std::string>>& params) {
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> groups;
  for (const auto& [k, v] : params) {
    auto [group, rest] = split_key(k);
    groups[group].emplace_back(rest, v);
  }
  Table t(out, {"Setting", "Value", "Setting", "Value"}, {});
  auto write_group = [&](const std::string& group) {
    auto it = groups.find(group);
    if (it == groups.end())
      return;
    t.raw_row("<tr bgcolor=\"#ffffff\"><td colspan=\"4\"><b>" + esc(group) + "</b></td></tr>\n");
    const auto& items = it->second;
    const size_t half = (items.size() + 1) / 2;  // column-major: the left column reads top to bottom first
    for (size_t r = 0; r < half; ++r) {
      std::vector<std::string> cells{"<span class=\"key\">" + esc(items[r].first) + "</span>",
                                     value_cell(items[r].second)};
      if (r + half < items.size()) {
        cells.push_back("<span class=\"key\">" + esc(items[r + half].first) + "</span>");
        cells.push_back(value_cell(items[r + half].second));
      } else {
        cells.insert(cells.end(), {"", ""});
      }
      t.row(cells);
    }
    groups.erase(it);
  };
  write_group("general");
  while (!groups.empty())
    write_group(groups.begin()->first);
}

}  // namespace

void write_config(std::string& out, const ReportData& data, bool new_page) {
  out += new_page ? "<h2 style=\"page-break-before: always\">Configuration</h2>\n" : section("Configuration");
  if (!data.comparison()) {
    if (data.runs[0].params.empty())
      out += "<p class=\"muted\">No configuration was recorded.</p>\n";
    else
      write_grouped(out, data.runs[0].params);
    return;
  }
  const ConfigDiff& diff = data.diff;
  out += "<h3>Settings that differ (" + std::to_string(diff.differing.size()) + ")</h3>\n";
  if (diff.differing.empty()) {
    out += "<p class=\"sub\">Every setting is the same in all runs.</p>\n";
  } else {
    std::vector<std::string> headers{"Setting"};
    for (size_t i = 0; i < data.runs.size(); ++i)
      headers.push_back(run_label_cell(data, i));
    Table t(out, headers, {});
    for (const ConfigDiff::Row& row : diff.differing) {
      std::string tr = "<tr" + t.stripe() + "><td class=\"key\">&#8800;&nbsp;" + esc(row.key) + "</td>";
      const std::optional<std::string>& first = row.values.empty() ? std::nullopt : row.values[0];
      for (size_t i = 0; i < row.values.size(); ++i) {
        const auto& v = row.values[i];
        const std::string text =
            v ? "<span class=\"key\">" + esc(*v) + "</span>" : "<span class=\"muted\">(absent)</span>";
        const bool changed = i > 0 && v != first;
        tr += changed ? std::string("<td bgcolor=\"") + kChangedTint + "\"><b>" + text + "</b></td>"
                      : "<td>" + text + "</td>";
      }
      t.raw_row(tr + "</tr>\n");
    }
    t.close();
    out += "<p class=\"sub\">&#8800; marks a setting that differs; highlighted: a value unlike the first run's.</p>\n";
  }
  std::set<std::string> differing;
  for (const ConfigDiff::Row& row : diff.differing)
    differing.insert(row.key);
  std::vector<std::pair<std::string, std::string>> same;
  for (const auto& kv : data.runs[0].params)
    if (!differing.count(kv.first))
      same.push_back(kv);
  out += "<h3>Settings shared by all runs (" + std::to_string(same.size()) + ")</h3>\n";
  if (!same.empty())
    write_grouped(out, same);
}

void write_events(std::string& out, const ReportData& data) {
  struct Item {
    size_t run;
    const EventRecord* event;
  };
  std::vector<Item> items;
  for (size_t i = 0; i < data.runs.size(); ++i)
    for (const EventRecord& e : data.runs[i].events)
      items.push_back({i, &e});
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.event->at_ms < b.event->at_ms; });
  out += section("Events");
  if (items.empty()) {
    out += "<p class=\"muted\">No events were recorded.</p>\n";
    return;
  }
  std::vector<std::string> headers{"Time"};
  if (data.comparison())
    headers.push_back("Run");
  headers.insert(headers.end(), {"Event", "Details"});
  Table t(out, headers, {});
  auto time_cell = [](int64_t at_ms) {
    return "<span style=\"white-space:nowrap\">" + esc(format_local_time(at_ms)) + "</span>";
  };
  // Checkpoints come in runs (every N steps, one per stop): each run of them is one row, and the
  // checkpoint files' artifact events are left out (the checkpoint event names the folder).
  std::vector<const EventRecord*> checkpoints;
  size_t checkpoints_run = 0;
  auto flush_checkpoints = [&] {
    if (checkpoints.empty())
      return;
    std::vector<std::string> cells{time_cell(checkpoints.front()->at_ms)};
    if (data.comparison())
      cells.push_back(run_label_cell(data, checkpoints_run));
    cells.push_back(checkpoints.size() == 1 ? "checkpoint" : "checkpoint &times;" + std::to_string(checkpoints.size()));
    cells.push_back(
        esc(checkpoints.size() == 1 ? describe_event(*checkpoints.front()) : describe_checkpoints(checkpoints)));
    t.row(cells);
    checkpoints.clear();
  };
  // An interruption (a spot notice or an interrupted process, to its resume and the phase event
  // that continues) is one row: its notice, emergency checkpoint, model save, end, status changes
  // and resume were eight or nine (Run history and the Spot table give the figures).
  std::vector<const EventRecord*> interruption;
  size_t interruption_run = 0;
  auto flush_interruption = [&] {
    if (interruption.empty())
      return;
    std::vector<std::string> cells{time_cell(interruption.front()->at_ms)};
    if (data.comparison())
      cells.push_back(run_label_cell(data, interruption_run));
    cells.push_back("interruption");
    cells.push_back(esc(describe_interruption(interruption)));
    t.row(cells);
    interruption.clear();
  };
  for (const Item& it : items) {
    const EventRecord& e = *it.event;
    if (e.kind == "artifact" && e.fields.is_object() && e.fields.contains("kind") && e.fields["kind"].is_string() &&
        e.fields["kind"].get<std::string>().rfind("checkpoint", 0) == 0)
      continue;
    if (!interruption.empty() && it.run == interruption_run) {
      // Folded until the resume, and the phase event that continues after it; any other kind
      // (an evaluation, a note, an error) keeps its own row.
      const bool after_resume = std::any_of(interruption.begin(), interruption.end(),
                                            [](const EventRecord* x) { return x->kind == "resumed"; });
      static const std::set<std::string> kFolded{"spot/notice", "spot/checkpoint", "checkpoint", "artifact",
                                                 "interrupted", "status",          "resumed"};
      if (after_resume ? e.kind == "phase" : kFolded.count(e.kind) > 0 && !is_error_event(e)) {
        interruption.push_back(&e);
        if (after_resume)
          flush_interruption();
        continue;
      }
      if (after_resume)
        flush_interruption();
    }
    if (opens_interruption(e)) {
      flush_checkpoints();
      flush_interruption();
      interruption_run = it.run;
      interruption.push_back(&e);
      continue;
    }
    if (e.kind == "checkpoint") {
      if (!checkpoints.empty() && checkpoints_run != it.run)
        flush_checkpoints();
      checkpoints_run = it.run;
      checkpoints.push_back(&e);
      continue;
    }
    flush_checkpoints();
    std::vector<std::string> cells{time_cell(e.at_ms)};
    if (data.comparison())
      cells.push_back(run_label_cell(data, it.run));
    const bool error = is_error_event(e);
    cells.push_back(error ? "<b class=\"error\">" + esc(e.kind) + "</b>" : esc(e.kind));
    cells.push_back(error ? "<span class=\"error\">" + esc(describe_event(e)) + "</span>" : esc(describe_event(e)));
    t.row(cells, error ? kErrorTint : "");
  }
  flush_checkpoints();
  flush_interruption();
}

void write_provenance(std::string& out, const ReportData& data) {
  out += section("Provenance");
  std::vector<std::string> headers;
  if (data.comparison())
    headers.push_back("Run");
  headers.insert(headers.end(), {"", "What", "File", "SHA-256"});
  Table t(out, headers, std::vector<bool>(headers.size(), false));
  auto mono = [](const std::string& s) { return "<span class=\"mono\">" + esc(s.empty() ? "-" : s) + "</span>"; };
  for (size_t i = 0; i < data.runs.size(); ++i) {
    const ReportRun& r = data.runs[i];
    auto row = [&](const std::string& dir, const std::string& what, const std::string& file, const std::string& sha) {
      std::vector<std::string> cells;
      if (data.comparison())
        cells.push_back(run_label_cell(data, i));
      cells.insert(cells.end(), {esc(dir), esc(what), mono(file), mono(sha)});
      t.row(cells);
    };
    for (const ProvenanceRow& p : run_provenance(r.events, r.artifacts, r.params))
      row(p.incoming ? "from" : "to", p.what, p.file, p.sha256);
  }
}

void write_artifacts(std::string& out, const ReportData& data) {
  bool any = false;
  for (const ReportRun& r : data.runs)
    any = any || !r.artifacts.empty();
  if (!any)
    return;
  out += section("Artifacts");
  std::vector<std::string> headers;
  if (data.comparison())
    headers.push_back("Run");
  headers.insert(headers.end(), {"Kind", "Path", "Bytes", "SHA-256"});
  std::vector<bool> numeric(headers.size(), false);
  numeric[headers.size() - 2] = true;
  Table t(out, headers, numeric);
  for (size_t i = 0; i < data.runs.size(); ++i)
    for (const ArtifactRow& a : artifact_rows(data.runs[i].artifacts)) {
      std::vector<std::string> cells;
      if (data.comparison())
        cells.push_back(run_label_cell(data, i));
      cells.push_back(esc(a.record.kind) +
                      (a.note.empty() ? "" : "<br><span class=\"muted\">" + esc(a.note) + "</span>"));
      cells.push_back("<span class=\"mono\">" + esc(a.record.path) + "</span>");
      cells.push_back(a.record.bytes < 0 ? "<span class=\"error\">missing</span>"
                                         : esc(format_value(static_cast<double>(a.record.bytes))));
      cells.push_back("<span class=\"mono\">" + esc(a.record.sha256.empty() ? "-" : a.record.sha256) + "</span>");
      t.row(cells);
    }
}

}  // namespace lathe::report::html
