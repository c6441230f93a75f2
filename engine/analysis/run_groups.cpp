// Grouping runs by their config and the spread of their metric summaries (see run_groups.h).
#include "engine/analysis/run_groups.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "engine/core/error.h"
#include "engine/store/store.h"

namespace lathe {

namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + ",") {
    if (c == ',') {
      size_t b = cur.find_first_not_of(" \t"), e = cur.find_last_not_of(" \t");
      out.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  return out;
}

std::string fmt(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}

}  // namespace

GroupBy GroupBy::parse(const std::string& text) {
  GroupBy by;
  if (text.find_first_not_of(" \t") == std::string::npos)
    return by;
  std::vector<std::string> plus, minus;
  for (const std::string& item : split_commas(text)) {
    if (item.empty() || item == "-")
      throw ConfigError("--group-by '" + text +
                        "': an empty key; allowed: config keys separated by commas (prune.ratio,quant.mode), or keys "
                        "to leave out each with a leading '-' (-seed)");
    (item[0] == '-' ? minus : plus).push_back(item[0] == '-' ? item.substr(1) : item);
  }
  if (!plus.empty() && !minus.empty())
    throw ConfigError("--group-by '" + text +
                      "': mixes keys to group by and keys to leave out ('-'); allowed: one form or the other");
  if (!plus.empty()) {
    by.keys = plus;
  } else {
    by.without = minus;
    if (std::find(by.without.begin(), by.without.end(), "name") == by.without.end())
      by.without.push_back("name");  // a sweep writes its knob values (seed too) into the name
  }
  return by;
}

std::string GroupBy::describe() const {
  std::string out;
  const auto& list = keys.empty() ? without : keys;
  for (const std::string& k : list)
    out += (out.empty() ? "" : ", ") + k;
  return keys.empty() ? "config without " + out : out;
}

bool key_matches(const std::string& key, const std::string& entry) {
  if (key == entry)
    return true;
  return key.size() > entry.size() + 1 && key.compare(key.size() - entry.size(), entry.size(), entry) == 0 &&
         key[key.size() - entry.size() - 1] == '.';
}

Spread spread_of(const std::vector<double>& values) {
  Spread s;
  double sum = 0;
  for (double v : values)
    if (std::isfinite(v)) {
      if (s.n == 0 || v < s.min)
        s.min = v;
      if (s.n == 0 || v > s.max)
        s.max = v;
      sum += v;
      ++s.n;
    }
  if (s.n == 0)
    return s;
  s.mean = sum / static_cast<double>(s.n);
  if (s.n >= 2) {  // two passes: the squared deviations from the mean, divided by n - 1
    double ss = 0;
    for (double v : values)
      if (std::isfinite(v))
        ss += (v - s.mean) * (v - s.mean);
    s.std = std::sqrt(ss / static_cast<double>(s.n - 1));
  }
  return s;
}

const GroupMetric* RunGroup::metric(const std::string& name) const {
  for (const GroupMetric& m : metrics)
    if (m.metric == name)
      return &m;
  return nullptr;
}

std::vector<RunGroup> group_runs(const std::vector<RunFacts>& runs, const GroupBy& by) {
  using Key = std::vector<std::pair<std::string, std::string>>;
  std::vector<Key> keys;
  for (const RunFacts& r : runs) {
    Key k;
    if (!by.keys.empty()) {
      for (const std::string& want : by.keys) {
        auto it = std::find_if(r.params.begin(), r.params.end(), [&](const auto& p) { return p.first == want; });
        k.emplace_back(want, it == r.params.end() ? "(absent)" : it->second);
      }
    } else {
      for (const auto& param : r.params)  // a pair, not a binding: clang 14 cannot capture bindings
        if (std::none_of(by.without.begin(), by.without.end(),
                         [&](const std::string& w) { return key_matches(param.first, w); }))
          k.emplace_back(param.first, param.second);
      std::sort(k.begin(), k.end());
    }
    keys.push_back(std::move(k));
  }
  std::map<Key, size_t> index;
  std::vector<RunGroup> groups;
  std::vector<std::vector<size_t>> members;
  for (size_t i = 0; i < runs.size(); ++i) {
    auto [it, fresh] = index.emplace(keys[i], groups.size());
    if (fresh) {
      groups.push_back({});
      groups.back().key = keys[i];
      members.emplace_back();
    }
    groups[it->second].run_ids.push_back(runs[i].id);
    members[it->second].push_back(i);
  }
  // Groups in key order, numbers compared as numbers (ratio 0.3 before 0.5 before 0.9).
  const auto value_less = [](const std::string& a, const std::string& b) {
    char *ea = nullptr, *eb = nullptr;
    const double da = std::strtod(a.c_str(), &ea), db = std::strtod(b.c_str(), &eb);
    if (!a.empty() && !b.empty() && *ea == '\0' && *eb == '\0' && da != db)
      return da < db;
    return a < b;
  };
  std::vector<size_t> order(groups.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const Key &a = groups[x].key, &b = groups[y].key;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (a[i].first != b[i].first)
        return a[i].first < b[i].first;
      if (a[i].second != b[i].second)
        return value_less(a[i].second, b[i].second);
    }
    return a.size() < b.size();
  });
  {
    std::vector<RunGroup> sorted_groups;
    std::vector<std::vector<size_t>> sorted_members;
    for (size_t i : order) {
      sorted_groups.push_back(std::move(groups[i]));
      sorted_members.push_back(std::move(members[i]));
    }
    groups.swap(sorted_groups);
    members.swap(sorted_members);
  }
  // Label each group by the keys whose value is not the same in every group (absent counts as a value).
  std::set<std::string> all_keys;
  for (const RunGroup& g : groups)
    for (const auto& kv : g.key)
      all_keys.insert(kv.first);
  std::vector<std::string> telling;
  for (const std::string& k : all_keys) {
    std::set<std::string> values;
    for (const RunGroup& g : groups) {
      auto it = std::find_if(g.key.begin(), g.key.end(), [&](const auto& p) { return p.first == k; });
      values.insert(it == g.key.end() ? "(absent)" : it->second);
    }
    if (values.size() > 1)
      telling.push_back(k);
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    RunGroup& g = groups[gi];
    for (const std::string& k : telling) {
      auto it = std::find_if(g.key.begin(), g.key.end(), [&](const auto& p) { return p.first == k; });
      g.label += (g.label.empty() ? "" : " ") + k + "=" + (it == g.key.end() ? "(absent)" : it->second);
    }
    if (g.label.empty())
      g.label = "all runs";
    // Every metric any member has, each summary statistic's spread over the members that have it.
    std::map<std::string, std::vector<const MetricSummary*>> by_metric;
    for (size_t i : members[gi])
      for (const MetricSummary& m : runs[i].summaries)
        by_metric[m.metric].push_back(&m);
    for (const auto& [name, list] : by_metric) {
      GroupMetric gm;
      gm.metric = name;
      gm.direction = list.front()->direction;
      std::vector<double> last, best, mn, mx;
      for (const MetricSummary* m : list) {
        last.push_back(m->last);
        best.push_back(m->best());
        mn.push_back(m->min);
        mx.push_back(m->max);
      }
      gm.last = spread_of(last);
      gm.best = spread_of(best);
      gm.min = spread_of(mn);
      gm.max = spread_of(mx);
      g.metrics.push_back(std::move(gm));
    }
  }
  return groups;
}

std::vector<RunFacts> read_run_facts(const Store& store, const std::vector<std::string>& run_ids) {
  std::vector<RunFacts> facts;
  facts.reserve(run_ids.size());
  for (const std::string& id : run_ids)
    facts.push_back({id, store.params(id), store.summaries(id)});
  return facts;
}

std::vector<RunGroup> group_runs(const Store& store, const std::vector<std::string>& run_ids, const GroupBy& by) {
  return group_runs(read_run_facts(store, run_ids), by);
}

std::string format_spread(const Spread& s, int digits) {
  if (s.n == 0)
    return "-";
  const std::string n = " (n=" + std::to_string(s.n) + ")";
  if (s.n == 1)
    return fmt(s.mean, digits) + n;
  return fmt(s.mean, digits) + " \u00b1 " + fmt(s.std, digits > 2 ? digits - 2 : 1) + n;
}

}  // namespace lathe
