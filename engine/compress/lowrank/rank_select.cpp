// Rank selection by energy and by bytes target, per layer and global (see rank_select.h).
#include "engine/compress/lowrank/rank_select.h"

#include <algorithm>
#include <queue>

#include "engine/core/error.h"

namespace lathe {

int64_t max_saving_rank(int64_t rows, int64_t cols) {
  LATHE_CHECK(rows >= 1 && cols >= 1, "low-rank: a ", rows, " x ", cols, " matrix");
  const int64_t r = (rows * cols - 1) / (rows + cols);  // largest r with r (rows + cols) < rows cols
  return std::min({r, rows, cols});
}

bool saves_bytes(int64_t rows, int64_t cols, int64_t rank) { return rank >= 1 && rank * (rows + cols) < rows * cols; }

int64_t rank_for_energy(const std::vector<double>& sigma, double energy) {
  LATHE_CHECK(!sigma.empty() && energy > 0 && energy <= 1, "low-rank: energy ", energy, " over ", sigma.size(),
              " singular values");
  double total = 0;
  for (double s : sigma)
    total += s * s;
  const double goal = energy * total * (1 - 1e-12);
  double kept = 0;
  for (size_t r = 0; r < sigma.size(); ++r) {
    kept += sigma[r] * sigma[r];
    if (kept >= goal)
      return static_cast<int64_t>(r) + 1;
  }
  return static_cast<int64_t>(sigma.size());
}

int64_t rank_for_bytes_ratio(int64_t rows, int64_t cols, double ratio) {
  LATHE_CHECK(rows >= 1 && cols >= 1 && ratio > 0, "low-rank: bytes ratio ", ratio, " for a ", rows, " x ", cols,
              " matrix");
  // A tiny slack so that a ratio meant exactly (r (rows+cols) / (rows cols)) gives r.
  const double r = ratio * static_cast<double>(rows) * static_cast<double>(cols) / static_cast<double>(rows + cols);
  return std::min({static_cast<int64_t>(r * (1 + 1e-12)), rows, cols});
}

std::vector<int64_t> global_ranks_for_energy(const std::vector<LayerSpectrum>& layers, double energy) {
  LATHE_CHECK(energy > 0 && energy <= 1, "low-rank: energy ", energy);
  struct Entry {
    double e;
    size_t layer;
  };
  std::vector<Entry> all;
  double total = 0;
  for (size_t l = 0; l < layers.size(); ++l)
    for (double s : layers[l].sigma) {
      all.push_back({s * s, l});
      total += s * s;
    }
  std::stable_sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.e > b.e; });
  std::vector<int64_t> ranks(layers.size(), 0);
  const double goal = energy * total * (1 - 1e-12);
  double kept = 0;
  for (const Entry& x : all) {
    if (kept >= goal)
      break;
    kept += x.e;
    ++ranks[x.layer];
  }
  for (size_t l = 0; l < layers.size(); ++l)
    ranks[l] = std::max<int64_t>(ranks[l], std::min<int64_t>(1, static_cast<int64_t>(layers[l].sigma.size())));
  return ranks;
}

std::vector<int64_t> global_ranks_for_bytes_ratio(const std::vector<LayerSpectrum>& layers, double ratio) {
  LATHE_CHECK(ratio > 0, "low-rank: bytes ratio ", ratio);
  double dense = 0;
  for (const LayerSpectrum& l : layers)
    dense += static_cast<double>(l.rows) * static_cast<double>(l.cols);
  const double budget = ratio * dense;

  std::vector<int64_t> ranks(layers.size(), 0), caps(layers.size(), 0);
  std::vector<double> layer_energy(layers.size(), 0);
  double used = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerSpectrum& s = layers[l];
    LATHE_CHECK(static_cast<int64_t>(s.sigma.size()) == std::min(s.rows, s.cols), "low-rank: layer ", l, " has ",
                s.sigma.size(), " singular values for a ", s.rows, " x ", s.cols, " matrix");
    caps[l] = max_saving_rank(s.rows, s.cols);
    for (double x : s.sigma)
      layer_energy[l] += x * x;
    if (caps[l] >= 1) {
      ranks[l] = 1;
      used += static_cast<double>(s.rows + s.cols);
    } else {
      used += static_cast<double>(s.rows) * static_cast<double>(s.cols);
    }
  }
  // Marginal gains per value fall along each layer's (descending) spectrum, so taking the best
  // next gain each time is the optimal greedy for this budget.
  struct Next {
    double gain;
    size_t layer;
    bool operator<(const Next& o) const { return gain < o.gain || (gain == o.gain && layer > o.layer); }
  };
  auto gain_of = [&](size_t l) {
    const LayerSpectrum& s = layers[l];
    const double sig = s.sigma[static_cast<size_t>(ranks[l])];
    return layer_energy[l] > 0 ? sig * sig / layer_energy[l] / static_cast<double>(s.rows + s.cols) : 0.0;
  };
  std::priority_queue<Next> heap;
  for (size_t l = 0; l < layers.size(); ++l)
    if (ranks[l] >= 1 && ranks[l] < caps[l])
      heap.push({gain_of(l), l});
  while (!heap.empty()) {
    const size_t l = heap.top().layer;
    heap.pop();
    const double cost = static_cast<double>(layers[l].rows + layers[l].cols);
    if (used + cost > budget * (1 + 1e-12))
      continue;  // this layer's next value does not fit; a cheaper layer's may
    used += cost;
    ++ranks[l];
    if (ranks[l] < caps[l])
      heap.push({gain_of(l), l});
  }
  // A layer taken to its cap saves almost nothing; where the budget left covers its few values
  // more, it stays dense instead: exact, and one matmul instead of two.
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerSpectrum& s = layers[l];
    if (caps[l] < 1 || ranks[l] != caps[l])
      continue;
    const double extra = static_cast<double>(s.rows * s.cols - caps[l] * (s.rows + s.cols));
    if (used + extra <= budget * (1 + 1e-12)) {
      used += extra;
      ranks[l] = 0;
    }
  }
  return ranks;
}

}  // namespace lathe
