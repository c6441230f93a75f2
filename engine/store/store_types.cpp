// Spellings of run statuses, the default metric direction, and the small helpers on store types.
#include "engine/store/store_types.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "engine/core/error.h"

namespace lathe {

namespace {
constexpr std::array<std::string_view, 7> kStatusNames{"queued",    "running",     "finished",  "failed",
                                                       "cancelled", "interrupted", "incomplete"};
}

std::string_view status_name(RunStatus s) {
  const auto i = static_cast<size_t>(s);
  return i < kStatusNames.size() ? kStatusNames[i] : "?";
}

RunStatus parse_status(std::string_view s) {
  for (size_t i = 0; i < kStatusNames.size(); ++i)
    if (kStatusNames[i] == s)
      return static_cast<RunStatus>(i);
  std::string allowed;
  for (std::string_view n : kStatusNames)
    allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  throw DataError("unknown run status \"" + std::string(s) + "\" (allowed: " + allowed + ")");
}

Direction default_direction(std::string_view metric) {
  std::string lower(metric);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("loss") != std::string::npos ? Direction::minimize : Direction::maximize;
}

const MetricSummary* RunListItem::metric(std::string_view name) const {
  const auto it = std::lower_bound(metrics.begin(), metrics.end(), name,
                                   [](const MetricSummary& m, std::string_view n) { return m.metric < n; });
  return it != metrics.end() && it->metric == name ? &*it : nullptr;
}

std::vector<Point> DownsampledSeries::points() const {
  std::vector<Point> out;
  out.reserve(buckets.size() * 4);
  for (const Bucket& b : buckets) {
    Point pts[4];
    int k = 0;
    pts[k++] = b.first;
    if (!std::isnan(b.min.value)) {  // an all-NaN bucket has no min/max points
      pts[k++] = b.min;
      pts[k++] = b.max;
    }
    pts[k++] = b.last;
    for (int i = 1; i < k; ++i)
      for (int j = i; j > 0 && pts[j].step < pts[j - 1].step; --j)
        std::swap(pts[j], pts[j - 1]);
    for (int i = 0; i < k; ++i)
      if (out.empty() || out.back().step != pts[i].step)
        out.push_back(pts[i]);
  }
  return out;
}

}  // namespace lathe
