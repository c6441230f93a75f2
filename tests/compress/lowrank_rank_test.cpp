// Rank selection on constructed spectra with known singular values: by energy (per layer and one
// threshold over all layers), by bytes target (per layer: the largest rank under the ratio; global:
// one budget, spent where a singular value keeps the most of its layer's energy per value), and the
// rule that a layer is left dense when no rank saves bytes.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/compress/lowrank/rank_select.h"

namespace lathe {
namespace {

std::vector<double> sqrt_of(const std::vector<double>& energies) {
  std::vector<double> s;
  for (double e : energies)
    s.push_back(std::sqrt(e));
  return s;
}

TEST(LowRankRank, ByEnergy) {
  const std::vector<double> s = sqrt_of({0.5, 0.3, 0.15, 0.05});  // sigma^2 sums to 1
  EXPECT_EQ(rank_for_energy(s, 0.4), 1);
  EXPECT_EQ(rank_for_energy(s, 0.5), 1);  // exactly met
  EXPECT_EQ(rank_for_energy(s, 0.8), 2);  // exactly met, despite rounding in the sum
  EXPECT_EQ(rank_for_energy(s, 0.81), 3);
  EXPECT_EQ(rank_for_energy(s, 0.95), 3);
  EXPECT_EQ(rank_for_energy(s, 0.96), 4);
  EXPECT_EQ(rank_for_energy(s, 1.0), 4);
}

TEST(LowRankRank, ByBytesRatio) {
  // The mlp's first layer, 512 x 784: r (512 + 784) <= 0.5 x 512 x 784 -> r = 154 (155 x 1296 > 200704).
  EXPECT_EQ(rank_for_bytes_ratio(512, 784, 0.5), 154);
  EXPECT_EQ(rank_for_bytes_ratio(256, 512, 0.5), 85);
  EXPECT_EQ(rank_for_bytes_ratio(10, 256, 0.5), 4);
  EXPECT_EQ(rank_for_bytes_ratio(10, 10, 0.4), 2);   // exactly 40 of 100 values
  EXPECT_EQ(rank_for_bytes_ratio(10, 10, 0.01), 0);  // even rank 1 (20 values) is over 1
  EXPECT_EQ(rank_for_bytes_ratio(3, 1000, 0.999), 2);
}

TEST(LowRankRank, SavingRule) {
  EXPECT_EQ(max_saving_rank(4, 4), 1);  // rank 2 takes 16 values, as many as the matrix
  EXPECT_TRUE(saves_bytes(4, 4, 1));
  EXPECT_FALSE(saves_bytes(4, 4, 2));
  EXPECT_FALSE(saves_bytes(4, 4, 0));
  EXPECT_EQ(max_saving_rank(1, 5), 0);
  EXPECT_EQ(max_saving_rank(512, 784), 309);  // 309 x 1296 = 400464 < 401408 <= 310 x 1296
  EXPECT_EQ(max_saving_rank(3, 1000), 2);
}

TEST(LowRankRank, GlobalEnergyIsOneThresholdOverAllLayers) {
  // sigma^2: layer 0 {9, 1}, layer 1 {4, 4}; total 18.
  const std::vector<LayerSpectrum> layers = {{2, 3, {3, 1}}, {2, 2, {2, 2}}};
  EXPECT_EQ(global_ranks_for_energy(layers, 0.5), (std::vector<int64_t>{1, 1}));  // 9 >= 9, layer 1 keeps its floor
  EXPECT_EQ(global_ranks_for_energy(layers, 0.7), (std::vector<int64_t>{1, 1}));  // 9 + 4 = 13 >= 12.6
  EXPECT_EQ(global_ranks_for_energy(layers, 0.9), (std::vector<int64_t>{1, 2}));  // 17 >= 16.2
  EXPECT_EQ(global_ranks_for_energy(layers, 1.0), (std::vector<int64_t>{2, 2}));
}

TEST(LowRankRank, GlobalBytesBudgetGoesWhereItKeepsTheMostEnergy) {
  // Two 10 x 10 layers (20 values per rank, cap 4): A has one dominant value, B a flat spectrum.
  std::vector<double> a(10, 1.0), b(10, 1.0);
  a[0] = 10;
  const std::vector<LayerSpectrum> layers = {{10, 10, a}, {10, 10, b}};
  EXPECT_EQ(global_ranks_for_bytes_ratio(layers, 0.2), (std::vector<int64_t>{1, 1}));  // 40 of 200 values
  EXPECT_EQ(global_ranks_for_bytes_ratio(layers, 0.3), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(global_ranks_for_bytes_ratio(layers, 0.4), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(global_ranks_for_bytes_ratio(layers, 0.6), (std::vector<int64_t>{2, 4}));  // B capped, then A
  EXPECT_EQ(global_ranks_for_bytes_ratio(layers, 0.8), (std::vector<int64_t>{4, 4}));  // 160 values: both capped
  // Below the floor of rank 1 everywhere, rank 1 stays.
  EXPECT_EQ(global_ranks_for_bytes_ratio(layers, 0.1), (std::vector<int64_t>{1, 1}));

  // Costs differ: C is 100 x 10 (110 values per rank), D 10 x 10 (20). Equal relative spectra, so D,
  // five times cheaper per rank, fills first: of the budget 0.5 x 1100 = 550, rank 1 of both takes 130,
  // D up to its cap of 4 takes 60 more, then C grows by 3 ranks to 520 (a fifth rank would make it 630).
  // D, at its cap (80 values), then stays dense: its 20 values more fit in the 30 left.
  const std::vector<double> flat(10, 1.0);
  const std::vector<LayerSpectrum> mixed = {{100, 10, flat}, {10, 10, flat}};
  EXPECT_EQ(global_ranks_for_bytes_ratio(mixed, 0.5), (std::vector<int64_t>{4, 0}));
  // A budget of 418: C reaches rank 3 at 410, and the 8 values left do not cover D's 20.
  EXPECT_EQ(global_ranks_for_bytes_ratio(mixed, 0.38), (std::vector<int64_t>{3, 4}));
  // A layer no rank can shrink (1 x 5) stays dense (rank 0) and its values count against the budget.
  const std::vector<LayerSpectrum> with_vector = {{1, 5, {2}}, {10, 10, b}};
  EXPECT_EQ(global_ranks_for_bytes_ratio(with_vector, 0.5), (std::vector<int64_t>{0, 2}));  // 5 + 40 <= 52.5
}

}  // namespace
}  // namespace lathe
