// load_compare_data (see compare_data.h).
#include "widgets/ui/compare_data.h"

#include <QStringList>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/store/store.h"
#include "widgets/common/cost_metrics.h"

namespace lathe::ui {
namespace {

/// The main training's steps (the first started event's train_steps; total_steps before the plan
/// split them) over the config's train.epochs; 0 when either is missing.
double steps_per_epoch(const RunRecord& run, const std::vector<EventRecord>& events) {
  const auto cfg = nlohmann::json::parse(run.config_json, nullptr, false);
  const double epochs =
      cfg.is_object() && cfg.contains("train") && cfg["train"].is_object() ? cfg["train"].value("epochs", 0.0) : 0.0;
  for (const EventRecord& e : events)
    if (e.kind == "started" && e.fields.is_object()) {
      const double steps = e.fields.value("train_steps", e.fields.value("total_steps", 0.0));
      return epochs > 0 && steps > 0 ? steps / epochs : 0;
    }
  return 0;
}

}  // namespace

std::vector<std::string> CompareData::metricNames() const {
  std::set<std::string> names;
  for (const auto& per_run : summaries)
    for (const MetricSummary& s : per_run)
      names.insert(s.metric);
  return {names.begin(), names.end()};
}

const MetricSummary* CompareData::summary(size_t run, const std::string& metric) const {
  if (run >= summaries.size())
    return nullptr;
  for (const MetricSummary& s : summaries[run])
    if (s.metric == metric)
      return &s;
  return nullptr;
}

CompareData load_compare_data(const QString& dbPath, const QStringList& runIds, int buckets) {
  CompareData out;
  if (runIds.size() < 2 || runIds.size() > kMaxCompareRuns) {
    out.error = QString("Pick 2 to %1 runs to compare (%2 selected): select rows in Runs with Ctrl or Shift.")
                    .arg(kMaxCompareRuns)
                    .arg(runIds.size());
    return out;
  }
  try {
    Store::OpenOptions opt;
    opt.reap_stale = false;
    Store store = Store::open(dbPath.toStdString(), opt);
    std::vector<std::string> ids;
    for (const QString& id : runIds)
      ids.push_back(store.resolve_run(id.toStdString()));
    for (const std::string& id : ids) {
      out.runs.push_back(store.run(id));
      out.params.push_back(store.params(id));
      const std::vector<EventRecord> events = store.events(id);
      out.provenance.push_back(run_provenance(events, store.artifacts(id), out.params.back()));
      out.stepsPerEpoch.push_back(steps_per_epoch(out.runs.back(), events));
      out.summaries.push_back(store.summaries(id));
    }
    out.diff = store.diff_configs(ids);
    for (const std::string& metric : out.metricNames()) {
      auto& per_run = out.curves[metric];
      for (const std::string& id : ids)
        per_run.push_back(store.downsample(id, metric, buckets).points());
    }
    // $ per run and $ per accuracy point beside the logged metrics (no curves: one value a run).
    for (auto& per_run : out.summaries)
      widgets::add_derived_cost_summaries(per_run);
  } catch (const std::exception& e) {
    out = CompareData{};
    out.error = QString("Cannot read the runs to compare: %1").arg(e.what());
  }
  return out;
}

bool lower_is_better(const std::string& metric, const MetricSummary* summary) {
  return (summary ? summary->direction : default_direction(metric)) == Direction::minimize;
}

int best_run(const CompareData& data, const std::string& metric, bool use_last) {
  int best = -1, with_metric = 0;
  double best_value = 0;
  bool tie = true;
  for (size_t i = 0; i < data.runs.size(); ++i) {
    const MetricSummary* s = data.summary(i, metric);
    if (!s)
      continue;
    const double v = use_last ? s->last : s->best();
    if (std::isnan(v))
      continue;
    ++with_metric;
    if (best < 0) {
      best = static_cast<int>(i);
      best_value = v;
      continue;
    }
    tie = tie && v == best_value;
    if (s->direction == Direction::minimize ? v < best_value : v > best_value) {
      best = static_cast<int>(i);
      best_value = v;
    }
  }
  return with_metric >= 2 && !tie ? best : -1;
}

}  // namespace lathe::ui
