// A small random-forest regressor (Breiman 2001): bootstrap samples, a random subset of features
// tried at each split, variance-reduction splits, and permutation importance measured on each
// tree's out-of-bag samples. Compact on purpose: studies are tens to a few thousand runs and a
// handful of knobs, and Debian ships no C++ forest library that fits (mlpack's needs Armadillo and
// its own serialisation stack). Deterministic for a given seed. Qt-free.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe {

struct ForestOptions {
  int trees = 100;
  int max_depth = 12;
  int min_leaf = 2;            ///< samples a leaf keeps at least
  int features_per_split = 0;  ///< 0: max(1, features / 3), the usual choice for regression
  uint64_t seed = 1;
};

class RandomForest {
 public:
  /// x: rows of samples (each `features` long), y: one target per row. ConfigError for ragged
  /// rows, fewer than 2 samples or non-finite values.
  void fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y, const ForestOptions& options = {});
  double predict(const std::vector<double>& row) const;
  /// Per feature: the mean increase of the out-of-bag squared error when that feature's values are
  /// shuffled among a tree's out-of-bag samples (0 for a feature the forest does not use; may be
  /// slightly negative for noise). Computed by fit().
  const std::vector<double>& permutation_importance() const { return m_importance; }

 private:
  struct Node {
    int feature = -1;  ///< -1: a leaf
    double threshold = 0, value = 0;
    int left = -1, right = -1;
  };
  struct Tree {
    std::vector<Node> nodes;
    double predict(const std::vector<double>& row) const;
  };
  std::vector<Tree> m_trees;
  std::vector<double> m_importance;
};

/// Spearman's rank correlation (ties get their average rank); NaN when either side is constant or
/// there are fewer than 2 pairs.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace lathe
