// Group curves: members aligned by step, with the spread at every step (see group_series.h).
#include "engine/analysis/group_series.h"

#include <map>

#include "engine/store/store.h"

namespace lathe {

std::vector<GroupPoint> group_series(const std::vector<std::vector<Point>>& members) {
  std::map<int64_t, std::vector<double>> at;
  for (const auto& series : members)
    for (const Point& p : series)
      at[p.step].push_back(p.value);
  std::vector<GroupPoint> out;
  out.reserve(at.size());
  for (const auto& [step, values] : at)
    out.push_back({step, spread_of(values)});
  return out;
}

std::vector<GroupPoint> group_series(const Store& store, const std::vector<std::string>& run_ids,
                                     const std::string& metric, size_t max_points) {
  std::vector<std::vector<Point>> members;
  members.reserve(run_ids.size());
  for (const std::string& id : run_ids)
    members.push_back(store.series(id, metric));
  std::vector<GroupPoint> all = group_series(members);
  if (max_points < 2 || all.size() <= max_points)
    return all;
  const size_t k = (all.size() + max_points - 2) / (max_points - 1);
  std::vector<GroupPoint> thin;
  for (size_t i = 0; i < all.size(); i += k)
    thin.push_back(all[i]);
  if (thin.back().step != all.back().step)
    thin.push_back(all.back());
  return thin;
}

}  // namespace lathe
