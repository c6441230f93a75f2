// Knob importance: Spearman per knob and a random forest's permutation importance (see importance.h).
#include "engine/analysis/importance.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "engine/core/error.h"

namespace lathe {

namespace {

bool parse_number(const std::string& s, double& out) {
  if (s == "true" || s == "false") {
    out = s == "true" ? 1 : 0;
    return true;
  }
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size() && std::isfinite(out);
}

bool default_excluded(const std::string& key) {
  return key_matches(key, "name") || key_matches(key, "description") || key.rfind("output.", 0) == 0;
}

}  // namespace

ImportanceResult knob_importance(const std::vector<RunFacts>& runs, const ImportanceOptions& o) {
  if (o.stat != "last" && o.stat != "best")
    throw ConfigError("--stat '" + o.stat + "': allowed: last, best");
  ImportanceResult out;
  out.metric = o.metric;
  out.stat = o.stat;
  std::vector<const RunFacts*> with;
  std::vector<double> y;
  for (const RunFacts& r : runs)
    for (const MetricSummary& m : r.summaries)
      if (m.metric == o.metric) {
        const double v = o.stat == "last" ? m.last : m.best();
        if (std::isfinite(v)) {
          with.push_back(&r);
          y.push_back(v);
        }
      }
  out.runs = static_cast<int64_t>(with.size());
  if (with.size() < 4)
    throw ConfigError("--metric '" + o.metric + "': " + std::to_string(with.size()) +
                      " run(s) have a finite value of it; importance needs at least 4");
  // Each run's value of every candidate knob ("(absent)" when the run lacks the key).
  std::map<std::string, std::vector<std::string>> values;
  for (size_t i = 0; i < with.size(); ++i)
    for (const auto& [k, v] : with[i]->params)
      if (o.knobs.empty() ? !default_excluded(k) : std::find(o.knobs.begin(), o.knobs.end(), k) != o.knobs.end()) {
        auto& col = values[k];
        col.resize(with.size(), "(absent)");
        col[i] = v;
      }
  for (auto& [k, col] : values)
    col.resize(with.size(), "(absent)");
  for (const std::string& k : o.knobs)
    if (!values.count(k))
      throw ConfigError("--knob '" + k + "': no run with --metric " + o.metric + " has this config key");
  std::vector<std::string> knobs;
  std::vector<std::vector<double>> columns;
  for (const auto& [k, col] : values) {
    const std::set<std::string> distinct(col.begin(), col.end());
    if (distinct.size() < 2)
      continue;
    KnobImportance ki;
    ki.knob = k;
    ki.levels = static_cast<int64_t>(distinct.size());
    std::vector<double> num(col.size());
    for (size_t i = 0; i < col.size() && ki.numeric; ++i)
      ki.numeric = parse_number(col[i], num[i]);
    if (!ki.numeric) {  // ordered categories: the sorted distinct values' positions
      const std::vector<std::string> order(distinct.begin(), distinct.end());
      for (size_t i = 0; i < col.size(); ++i)
        num[i] = static_cast<double>(std::lower_bound(order.begin(), order.end(), col[i]) - order.begin());
    }
    ki.spearman = ki.numeric ? spearman(num, y) : std::nan("");
    knobs.push_back(k);
    columns.push_back(std::move(num));
    out.knobs.push_back(ki);
  }
  if (out.knobs.empty())
    throw ConfigError("importance: no knob varies among the " + std::to_string(with.size()) + " runs with " + o.metric);
  std::vector<std::vector<double>> x(with.size(), std::vector<double>(knobs.size()));
  for (size_t i = 0; i < with.size(); ++i)
    for (size_t f = 0; f < knobs.size(); ++f)
      x[i][f] = columns[f][i];
  RandomForest forest;
  forest.fit(x, y, o.forest);
  double positive = 0;
  for (size_t f = 0; f < knobs.size(); ++f) {
    out.knobs[f].permutation = forest.permutation_importance()[f];
    positive += std::max(0.0, out.knobs[f].permutation);
  }
  for (KnobImportance& k : out.knobs)
    k.share = positive > 0 ? std::max(0.0, k.permutation) / positive : 0;
  double mean = 0, ss_tot = 0, ss_res = 0;
  for (double v : y)
    mean += v;
  mean /= static_cast<double>(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    ss_tot += (y[i] - mean) * (y[i] - mean);
    ss_res += (forest.predict(x[i]) - y[i]) * (forest.predict(x[i]) - y[i]);
  }
  out.r2_train = ss_tot > 0 ? 1 - ss_res / ss_tot : 0;
  std::stable_sort(out.knobs.begin(), out.knobs.end(), [](const KnobImportance& a, const KnobImportance& b) {
    if (a.permutation != b.permutation)
      return a.permutation > b.permutation;
    const double sa = std::isnan(a.spearman) ? 0 : std::fabs(a.spearman),
                 sb = std::isnan(b.spearman) ? 0 : std::fabs(b.spearman);
    return sa > sb;
  });
  return out;
}

}  // namespace lathe
