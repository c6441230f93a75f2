// The random forest and Spearman's rho (see random_forest.h).
#include "engine/analysis/random_forest.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "engine/core/error.h"

namespace lathe {

namespace {

using Rows = std::vector<std::vector<double>>;

/// Best split of idx[lo, hi) on one feature: (sse after split, threshold, split position); sse is
/// +inf when no split leaves min_leaf on both sides.
struct Split {
  double sse = INFINITY, threshold = 0;
  int feature = -1, pos = -1;
};

}  // namespace

double RandomForest::Tree::predict(const std::vector<double>& row) const {
  int n = 0;
  while (nodes[n].feature >= 0)
    n = row[nodes[n].feature] <= nodes[n].threshold ? nodes[n].left : nodes[n].right;
  return nodes[n].value;
}

void RandomForest::fit(const Rows& x, const std::vector<double>& y, const ForestOptions& o) {
  if (x.size() != y.size() || x.size() < 2)
    throw ConfigError("random forest: " + std::to_string(x.size()) + " rows and " + std::to_string(y.size()) +
                      " targets; allowed: the same number, at least 2");
  const int features = static_cast<int>(x[0].size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (static_cast<int>(x[i].size()) != features)
      throw ConfigError("random forest: row " + std::to_string(i) + " has " + std::to_string(x[i].size()) +
                        " features, row 0 has " + std::to_string(features));
    if (!std::isfinite(y[i]) || std::any_of(x[i].begin(), x[i].end(), [](double v) { return !std::isfinite(v); }))
      throw ConfigError("random forest: row " + std::to_string(i) + " has a value that is not a finite number");
  }
  const int n = static_cast<int>(x.size());
  const int mtry = o.features_per_split > 0 ? std::min(o.features_per_split, features) : std::max(1, features / 3);
  std::mt19937_64 rng(o.seed);
  m_trees.clear();
  m_importance.assign(features, 0.0);
  std::vector<int> feature_order(features);
  std::iota(feature_order.begin(), feature_order.end(), 0);

  for (int t = 0; t < o.trees; ++t) {
    std::vector<int> sample(n), in_bag(n, 0);
    std::uniform_int_distribution<int> pick(0, n - 1);
    for (int& s : sample) {
      s = pick(rng);
      in_bag[s] = 1;
    }
    Tree tree;
    // Depth-first with an explicit stack: (node, lo, hi, depth) over `sample`.
    struct Job {
      int node, lo, hi, depth;
    };
    std::vector<Job> stack;
    tree.nodes.push_back({});
    stack.push_back({0, 0, n, 0});
    while (!stack.empty()) {
      const Job job = stack.back();
      stack.pop_back();
      double sum = 0, sumsq = 0;
      for (int i = job.lo; i < job.hi; ++i) {
        sum += y[sample[i]];
        sumsq += y[sample[i]] * y[sample[i]];
      }
      const int count = job.hi - job.lo;
      tree.nodes[job.node].value = sum / count;
      const double parent_sse = sumsq - sum * sum / count;
      if (job.depth >= o.max_depth || count < 2 * o.min_leaf || parent_sse <= 1e-12 * (1 + std::fabs(sumsq)))
        continue;
      std::shuffle(feature_order.begin(), feature_order.end(), rng);
      Split best;
      std::vector<int> order(sample.begin() + job.lo, sample.begin() + job.hi);
      for (int k = 0; k < mtry; ++k) {
        const int f = feature_order[k];
        std::sort(order.begin(), order.end(), [&](int a, int b) { return x[a][f] < x[b][f]; });
        double ls = 0, lsq = 0;
        for (int i = 0; i + 1 < count; ++i) {
          const double v = y[order[i]];
          ls += v;
          lsq += v * v;
          const int nl = i + 1, nr = count - nl;
          if (nl < o.min_leaf || nr < o.min_leaf || x[order[i]][f] == x[order[i + 1]][f])
            continue;
          const double rs = sum - ls, rsq = sumsq - lsq;
          const double sse = (lsq - ls * ls / nl) + (rsq - rs * rs / nr);
          if (sse < best.sse) {
            best = {sse, 0.5 * (x[order[i]][f] + x[order[i + 1]][f]), f, nl};
          }
        }
      }
      if (best.feature < 0 || best.sse >= parent_sse)
        continue;
      // Partition sample[lo, hi) by the threshold.
      const auto mid = std::partition(sample.begin() + job.lo, sample.begin() + job.hi,
                                      [&](int s) { return x[s][best.feature] <= best.threshold; });
      const int m = static_cast<int>(mid - sample.begin());
      const int left = static_cast<int>(tree.nodes.size());
      tree.nodes.push_back({});
      tree.nodes.push_back({});
      tree.nodes[job.node].feature = best.feature;
      tree.nodes[job.node].threshold = best.threshold;
      tree.nodes[job.node].left = left;
      tree.nodes[job.node].right = left + 1;
      stack.push_back({left, job.lo, m, job.depth + 1});
      stack.push_back({left + 1, m, job.hi, job.depth + 1});
    }
    // Out-of-bag permutation importance of this tree.
    std::vector<int> oob;
    for (int i = 0; i < n; ++i)
      if (!in_bag[i])
        oob.push_back(i);
    if (oob.size() >= 2) {
      double base = 0;
      for (int i : oob) {
        const double e = tree.predict(x[i]) - y[i];
        base += e * e;
      }
      base /= static_cast<double>(oob.size());
      for (int f = 0; f < features; ++f) {
        std::vector<int> shuffled = oob;
        std::shuffle(shuffled.begin(), shuffled.end(), rng);
        double err = 0;
        std::vector<double> row;
        for (size_t k = 0; k < oob.size(); ++k) {
          row = x[oob[k]];
          row[f] = x[shuffled[k]][f];
          const double e = tree.predict(row) - y[oob[k]];
          err += e * e;
        }
        m_importance[f] += err / static_cast<double>(oob.size()) - base;
      }
    }
    m_trees.push_back(std::move(tree));
  }
  for (double& v : m_importance)
    v /= std::max(1, o.trees);
}

double RandomForest::predict(const std::vector<double>& row) const {
  if (m_trees.empty())
    return std::nan("");
  double s = 0;
  for (const Tree& t : m_trees)
    s += t.predict(row);
  return s / static_cast<double>(m_trees.size());
}

namespace {
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<int> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]])
      ++j;
    const double avg = 0.5 * static_cast<double>(i + j) + 1.0;  // ranks from 1, ties averaged
    for (size_t k = i; k <= j; ++k)
      r[idx[k]] = avg;
    i = j + 1;
  }
  return r;
}
}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2)
    return std::nan("");
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa <= 0 || sbb <= 0)
    return std::nan("");
  return sab / std::sqrt(saa * sbb);
}

}  // namespace lathe
