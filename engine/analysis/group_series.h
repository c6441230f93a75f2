// The curve of a group: at each step, the n, mean, sample std (ddof = 1) and min/max of the
// members' values at that exact step. What the compare view and the reports draw as a mean line
// with a std band or a min/max envelope. Members that logged a step the others did not still
// count there (n says how many). Qt-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/analysis/run_groups.h"
#include "engine/store/store_types.h"

namespace lathe {

struct GroupPoint {
  int64_t step = 0;
  Spread spread;
};

/// Aligns the members' series by step. `members` each sorted by step (as Store::series returns).
std::vector<GroupPoint> group_series(const std::vector<std::vector<Point>>& members);

/// Reads each member's full series of `metric` and aligns them. When more than max_points steps
/// result, every k-th step is kept (k the smallest that fits; the last step always): a thinning,
/// never an average of neighbouring steps.
std::vector<GroupPoint> group_series(const Store& store, const std::vector<std::string>& run_ids,
                                     const std::string& metric, size_t max_points = 2000);

}  // namespace lathe
