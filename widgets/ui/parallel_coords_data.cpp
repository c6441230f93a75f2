// ParallelCoordsData (see parallel_coords_data.h).
#include "widgets/ui/parallel_coords_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "engine/store/store.h"

namespace lathe::ui {

ParallelRuns load_parallel_runs(const QString& dbPath, RunQuery query) {
  ParallelRuns out;
  try {
    Store store = Store::open(dbPath.toStdString(), Store::read_only_options());
    query.offset = 0;
    query.limit = 0;             // every run of the filter
    query.with_metrics.clear();  // every metric (the run table asks only for its columns)
    const RunPage page = store.list_runs(query);
    std::map<std::string, std::set<std::string>> distinct;
    std::set<std::string> metrics;
    for (const RunListItem& item : page.runs) {
      out.ids.push_back(item.run.id);
      out.names.push_back(item.run.name);
      std::map<std::string, std::string> p;
      for (auto& [k, v] : store.params(item.run.id)) {
        distinct[k].insert(v);
        p.emplace(std::move(k), std::move(v));
      }
      out.params.push_back(std::move(p));
      for (const MetricSummary& s : item.metrics)
        metrics.insert(s.metric);
      out.summaries.push_back(item.metrics);
    }
    // A key some runs lack differs too (absent vs present).
    for (const auto& [key, values] : distinct) {
      size_t present = 0;
      for (const auto& p : out.params)
        present += p.count(key);
      if (values.size() > 1 || (present > 0 && present < out.params.size()))
        out.knobs.push_back(key);
    }
    out.metrics.assign(metrics.begin(), metrics.end());
  } catch (const std::exception& e) {
    out = ParallelRuns{};
    out.error = QString("Could not read the runs: %1").arg(e.what());
  }
  return out;
}

std::vector<std::string> metric_axis_names(const std::string& metric) { return {"last " + metric, "best " + metric}; }

void fill_parallel_model(ParallelCoordsModel& model, const ParallelRuns& runs, const std::vector<std::string>& axes) {
  model.setRuns(runs.ids, runs.names);
  const size_t n = runs.ids.size();
  for (const std::string& axis : axes) {
    const bool last = axis.rfind("last ", 0) == 0, best = axis.rfind("best ", 0) == 0;
    const std::string metric = last || best ? axis.substr(5) : std::string();
    if ((last || best) && std::binary_search(runs.metrics.begin(), runs.metrics.end(), metric)) {
      std::vector<double> values(n, std::numeric_limits<double>::quiet_NaN());
      for (size_t i = 0; i < n; ++i) {
        const auto& s = runs.summaries[i];
        auto it = std::lower_bound(s.begin(), s.end(), metric,
                                   [](const MetricSummary& m, const std::string& name) { return m.metric < name; });
        if (it != s.end() && it->metric == metric && it->count > 0)
          values[i] = last ? it->last : it->best();
      }
      model.addNumericAxis(axis, values);
      continue;
    }
    bool known = false;
    std::vector<std::string> values(n);
    for (size_t i = 0; i < n; ++i)
      if (auto it = runs.params[i].find(axis); it != runs.params[i].end()) {
        values[i] = it->second;
        known = true;
      }
    if (!known)
      throw std::invalid_argument("parallel axis '" + axis +
                                  "': not a config key of these runs, nor 'last <metric>' / 'best <metric>' of a "
                                  "metric they logged");
    model.addAxis(axis, values);
  }
}

std::vector<std::string> default_parallel_axes(const ParallelRuns& runs, size_t maxKnobs) {
  std::vector<std::string> axes;
  for (const std::string& k : runs.knobs)
    if (axes.size() < maxKnobs && k != "name")
      axes.push_back(k);
  if (std::binary_search(runs.metrics.begin(), runs.metrics.end(), std::string("test/accuracy")))
    axes.push_back("last test/accuracy");
  else if (!runs.metrics.empty())
    axes.push_back("last " + runs.metrics.front());
  return axes;
}

}  // namespace lathe::ui
