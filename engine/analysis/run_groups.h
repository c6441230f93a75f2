// Run groups: many runs folded into groups by their config, so a study of prune ratio x seed reads
// as one row per ratio with the mean, spread and count of every metric summary. By default a group
// is "the config without seed" (and without name, which a sweep writes its knob values into);
// GroupBy can name the keys instead. Spread is the sample statistic (ddof = 1, as numpy's
// np.std(x, ddof=1)): a handful of seeds is a sample of the seeds one could have run.
// Qt-free: lathe-cli compare --group-by, the GUI's compare view and the reports all use it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe {

class Store;

/// How runs are grouped.
struct GroupBy {
  /// Group by exactly these flattened config keys ("prune.ratio"); a run without one counts as
  /// "(absent)". Empty: by every key except those matched by `without`.
  std::vector<std::string> keys;
  /// Keys left out when `keys` is empty: an entry matches a key equal to it or ending in ".<entry>"
  /// (so "seed" also drops "data.seed").
  std::vector<std::string> without{"seed", "name"};

  /// "" or "-seed" -> the default (config without seed); "a,b" -> those keys; "-seed,-x" -> the
  /// config without those. ConfigError naming the text when it mixes the two forms or has an
  /// empty key.
  static GroupBy parse(const std::string& text);
  /// What it means in words ("config without seed, name" / "prune.ratio, quant.calibration").
  std::string describe() const;
};

/// Whether `key` is matched by a `without` entry (equal, or ending in ".<entry>").
bool key_matches(const std::string& key, const std::string& entry);

/// n, mean, sample std (ddof = 1; NaN when n < 2), min and max of the finite values given (NaN and
/// infinities are left out and not counted).
struct Spread {
  int64_t n = 0;
  double mean = std::numeric_limits<double>::quiet_NaN();
  double std = std::numeric_limits<double>::quiet_NaN();
  double min = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
};
Spread spread_of(const std::vector<double>& values);

/// A metric over a group: the spread of each member's summary values.
struct GroupMetric {
  std::string metric;
  Direction direction = Direction::maximize;
  Spread last, best, min, max;
};

struct RunGroup {
  /// The group's values of the keys that tell the groups apart, "prune.ratio=0.5 quant.mode=qat";
  /// "all runs" when every run falls in one group.
  std::string label;
  std::vector<std::pair<std::string, std::string>> key;  ///< the group's values of every grouping key
  std::vector<std::string> run_ids;                      ///< members, in the order the runs were given
  std::vector<GroupMetric> metrics;                      ///< sorted by metric name
  const GroupMetric* metric(const std::string& name) const;
};

/// What grouping needs to know about a run.
struct RunFacts {
  std::string id;
  std::vector<std::pair<std::string, std::string>> params;  ///< flattened config
  std::vector<MetricSummary> summaries;
};

/// Groups the runs: groups ordered by their key values (numbers as numbers), members in the order
/// given; labels name only the keys whose values differ between groups.
std::vector<RunGroup> group_runs(const std::vector<RunFacts>& runs, const GroupBy& by);
/// Each run's params and summaries from the store (ids as stored).
std::vector<RunFacts> read_run_facts(const Store& store, const std::vector<std::string>& run_ids);
/// The same, reading each run's params and summaries from the store (ids as stored).
std::vector<RunGroup> group_runs(const Store& store, const std::vector<std::string>& run_ids, const GroupBy& by);

/// "mean ± std (n=N)" with `digits` significant digits; "mean (n=1)" for one value; "-" for none.
std::string format_spread(const Spread& s, int digits = 4);

}  // namespace lathe
