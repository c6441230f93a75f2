// What matters: for one metric over a set of runs, how much each knob (a config key whose value
// varies among the runs) drives it. Two views: Spearman's rank correlation of the knob with the
// metric (numeric knobs only: monotone effects, signed), and permutation importance from a small
// random forest fit to all knobs at once (any effect, interactions included, categorical knobs
// coded as ordered categories). `lathe-cli importance`, the GUI's bar chart and the reports use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/analysis/random_forest.h"
#include "engine/analysis/run_groups.h"

namespace lathe {

struct ImportanceOptions {
  std::string metric;
  std::string stat = "last";  ///< "last" or "best" value of each run's metric
  /// Knobs to weigh; empty: every config key whose value differs between the runs, except names,
  /// descriptions and output.* paths.
  std::vector<std::string> knobs;
  ForestOptions forest;
};

struct KnobImportance {
  std::string knob;
  bool numeric = true;     ///< every value parses as a number (else coded as ordered categories)
  int64_t levels = 0;      ///< distinct values
  double spearman = 0;     ///< NaN for categorical knobs
  double permutation = 0;  ///< mean increase of out-of-bag squared error when shuffled
  double share = 0;        ///< permutation / the sum of the positive ones (0..1)
};

struct ImportanceResult {
  std::string metric, stat;
  int64_t runs = 0;     ///< runs that have the metric (the sample the forest saw)
  double r2_train = 0;  ///< the forest's R^2 on the runs it was fit to (a fit check, not a held-out score)
  std::vector<KnobImportance> knobs;  ///< most important first (permutation, then |spearman|)
};

/// ConfigError naming the metric when fewer than 4 runs have it, naming the stat when it is not
/// last/best, and when no knob varies.
ImportanceResult knob_importance(const std::vector<RunFacts>& runs, const ImportanceOptions& options);

}  // namespace lathe
