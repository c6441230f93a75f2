// Spellings of run statuses, the default metric direction and unit, and the small helpers on store types.
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

/// A metric name in lower case, asked what it contains and how it ends (default_direction and
/// default_unit read the same naming conventions).
class MetricNameWords {
 public:
  explicit MetricNameWords(std::string_view metric) : m_lower(metric) {
    std::transform(m_lower.begin(), m_lower.end(), m_lower.begin(), [](unsigned char c) { return std::tolower(c); });
  }
  bool has(std::string_view word) const { return m_lower.find(word) != std::string::npos; }
  bool ends(std::string_view tail) const {
    return m_lower.size() >= tail.size() && m_lower.compare(m_lower.size() - tail.size(), tail.size(), tail) == 0;
  }

 private:
  std::string m_lower;
};
}  // namespace

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
  const MetricNameWords name(metric);
  // A drop or a gap is lost quality, whatever it is a drop of ("prune/accuracy_drop_pt").
  if (name.has("drop") || name.has("gap"))
    return Direction::minimize;
  // Rates and quality first: "throughput/dense/b1_samples_per_s" is a rate, not a time.
  for (std::string_view higher : {"accuracy", "samples_per_s", "throughput", "speedup", "mfu", "/util", "goal_met"})
    if (name.has(higher))
      return Direction::maximize;
  if (name.ends("_per_s"))  // a rate ("flops_per_sample" is a size)
    return Direction::maximize;
  // Sizes, times, money and errors are costs.
  // ("dist/comm_fraction", "dist/comm_s": communication the backward pass did not hide, a cost.)
  for (std::string_view lower_word :
       {"loss", "bytes", "latency", "cost", "usd", "params", "flops", "mem/", "memory", "seconds", "time", "skipped",
        "outliers", "f32_layers", "error", "comm_", "power_w"})
    if (name.has(lower_word))
      return Direction::minimize;
  if (name.ends("_ms") || name.ends("_s") || name.ends("ratio"))
    return Direction::minimize;
  return Direction::maximize;
}

std::string default_unit(std::string_view metric) {
  const MetricNameWords name(metric);
  // The most specific endings first: "weight_bytes_ratio" is a ratio, "b1_samples_per_s" a rate.
  if (name.ends("samples_per_s"))
    return "samples/s";
  if (name.has("usd"))
    return "USD";
  if (name.ends("ratio"))
    return "ratio";
  if (name.ends("bytes_per_step"))
    return "bytes/step";
  if (name.ends("bytes"))
    return "bytes";
  if (name.ends("_pct"))
    return "%";
  if (name.ends("_pt"))
    return "points";
  if (name.ends("_ms"))
    return "ms";
  if (name.ends("power_w"))
    return "W";
  if (name.ends("_mhz"))
    return "MHz";
  if (name.ends("_s") || name.has("seconds"))
    return "s";
  if (name.ends("flops_per_sample"))
    return "FLOP/sample";
  if (name.has("speedup"))
    return "x";
  for (std::string_view share : {"accuracy", "/util", "mfu", "fraction", "sparsity", "activity", "occupancy",
                                 "dram_bw_util", "_share", "kept_energy"})
    if (name.has(share))
      return "fraction";
  return "";
}

std::string metric_label(std::string_view metric) {
  const std::string unit = default_unit(metric);
  return unit.empty() ? std::string(metric) : std::string(metric) + " (" + unit + ")";
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
