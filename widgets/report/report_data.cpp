// Reads what a report shows from the store (see report_data.h).
#include "widgets/report/report_data.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "engine/core/error.h"
#include "widgets/common/cost_metrics.h"

namespace lathe::report {

const MetricSummary* ReportRun::summary(const std::string& metric) const {
  for (const MetricSummary& s : summaries)
    if (s.metric == metric)
      return &s;
  return nullptr;
}

std::vector<std::string> order_metrics(std::vector<std::string> names) {
  static const char* const kOrder[] = {
      "train/loss",  "test/loss",          "train/accuracy",         "test/accuracy",   "train/samples_per_s",
      "device/util", "device/mfu",         "mem/peak_bytes",         "cost/usd",        "train/lr",
      "model/bytes", "model/params",       "model/flops_per_sample", "dist/world_size", "dist/comm_fraction",
      "dist/comm_s", "dist/bytes_per_step"};
  auto rank = [](const std::string& n) {
    for (size_t i = 0; i < std::size(kOrder); ++i)
      if (n == kOrder[i])
        return static_cast<int>(i);
    return static_cast<int>(std::size(kOrder));
  };
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    const int ra = rank(a), rb = rank(b);
    return ra != rb ? ra < rb : a < b;
  });
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

namespace {

void read_started_event(ReportRun& run) {
  for (const EventRecord& e : run.events) {
    if (e.kind != "started" || !e.fields.is_object())
      continue;
    if (e.fields.contains("instance") && e.fields["instance"].is_string())
      run.instance = e.fields["instance"].get<std::string>();
    if (e.fields.contains("price_usd_per_hour") && e.fields["price_usd_per_hour"].is_number())
      run.usd_per_hour = e.fields["price_usd_per_hour"].get<double>();
    if (e.fields.contains("cost_projection") && e.fields["cost_projection"].is_string())
      run.cost_projection = e.fields["cost_projection"].get<std::string>();
  }
}

}  // namespace

std::vector<ChartGroup> chart_groups(const std::vector<std::string>& charted) {
  std::vector<ChartGroup> groups;
  std::map<std::string, size_t> group_of;  // "dist/rank*/<rest>" -> its chart
  std::map<std::string, std::vector<std::pair<long, std::string>>> ranks;
  for (const std::string& m : charted) {
    const std::string prefix = "dist/rank";
    const size_t slash = m.find('/', prefix.size());
    const bool per_rank =
        m.rfind(prefix, 0) == 0 && slash != std::string::npos && slash > prefix.size() &&
        std::all_of(m.begin() + static_cast<long>(prefix.size()), m.begin() + static_cast<long>(slash),
                    [](char c) { return c >= '0' && c <= '9'; });
    if (!per_rank) {
      groups.push_back({m, {m}, {""}});
      continue;
    }
    const std::string title = prefix + "*" + m.substr(slash);
    if (!group_of.count(title)) {
      group_of[title] = groups.size();
      groups.push_back({title, {}, {}});
    }
    ranks[title].emplace_back(std::stol(m.substr(prefix.size(), slash - prefix.size())), m);
  }
  for (auto& [title, list] : ranks) {
    std::sort(list.begin(), list.end());
    ChartGroup& g = groups[group_of[title]];
    for (const auto& [rank, metric] : list) {
      g.metrics.push_back(metric);
      g.parts.push_back("rank " + std::to_string(rank));
    }
  }
  return groups;
}

std::vector<ArtifactRow> artifact_rows(const std::vector<ArtifactRecord>& artifacts) {
  std::vector<ArtifactRow> rows;
  std::map<std::string, size_t> row_of;  // path (or "checkpoint") -> its row
  std::map<std::string, int> writes;
  for (const ArtifactRecord& a : artifacts) {
    const std::string key = a.kind.rfind("checkpoint", 0) == 0 ? std::string("\x01checkpoint") : a.path;
    ++writes[key];
    const auto it = row_of.find(key);
    if (it == row_of.end()) {
      row_of[key] = rows.size();
      rows.push_back({a, ""});
    } else {
      rows[it->second].record = a;
    }
  }
  for (const auto& [key, row] : row_of) {
    const int n = writes[key];
    if (n < 2)
      continue;
    rows[row].note = key == "\x01checkpoint" ? "the newest of " + std::to_string(n) +
                                                   " checkpoints written (older ones deleted as checkpoint.keep says)"
                                             : "written " + std::to_string(n) + " times: the last write";
  }
  return rows;
}

std::vector<std::string> resolve_report_runs(const Store& store, const std::vector<std::string>& run_refs) {
  if (run_refs.empty())
    throw ConfigError("a report needs at least one run: give a run id, a unique id prefix or a run name");
  std::vector<std::string> ids;
  for (const std::string& ref : run_refs) {
    const std::string id = store.resolve_run(ref);
    if (std::find(ids.begin(), ids.end(), id) != ids.end())
      throw ConfigError("run " + id + " is given twice (as \"" + ref + "\"): list each run once");
    ids.push_back(id);
  }
  return ids;
}

ReportData collect_report_data(const Store& store, const std::vector<std::string>& run_refs) {
  const std::vector<std::string> ids = resolve_report_runs(store, run_refs);
  ReportData data;
  data.store_path = store.path();
  data.generated_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::map<std::string, int> name_count;
  std::vector<std::string> all_metrics, charted;
  for (const std::string& id : ids) {
    ReportRun run;
    run.record = store.run(id);
    run.params = store.params(id);
    run.summaries = store.summaries(id);
    widgets::add_derived_cost_summaries(run.summaries);  // $ per run, $ per accuracy point
    run.events = store.events(id);
    run.artifacts = store.artifacts(id);
    for (size_t i = 0; i < run.record.devices.size(); ++i)
      run.device += (i ? ", " : "") + run.record.devices[i];
    read_started_event(run);
    if (const MetricSummary* cost = run.summary("cost/usd"))
      run.cost_usd = cost->last;
    for (const MetricSummary& s : run.summaries) {
      all_metrics.push_back(s.metric);
      if (s.count >= 2 && s.min != s.max) {  // a constant (world size, optimizer bytes) needs no chart
        run.series[s.metric] = store.downsample(id, s.metric, kChartBuckets).points();
        charted.push_back(s.metric);
      }
    }
    ++name_count[run.record.name];
    data.runs.push_back(std::move(run));
  }
  for (ReportRun& run : data.runs) {
    run.label = run.record.name.empty() ? run.record.id : run.record.name;
    if (data.runs.size() > 1 && (run.record.name.empty() || name_count[run.record.name] > 1))
      run.label = run.record.name.empty() ? run.record.id : run.record.name + " (" + run.record.id + ")";
  }
  data.metrics = order_metrics(all_metrics);
  data.charted = order_metrics(charted);
  if (data.comparison())
    data.diff = store.diff_configs(ids);
  return data;
}

}  // namespace lathe::report
