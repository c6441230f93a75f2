// Rank selection for the low-rank stage: how many singular values each factored layer keeps, by
// kept-energy fraction or by a bytes target, for one layer or for all layers at once. Pure
// functions of the singular values and the matrix shapes, so the tests construct the spectra.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe {

/// One layer's matrix (rows x cols: out x in*kh*kw) and its singular values, descending.
struct LayerSpectrum {
  int64_t rows = 0, cols = 0;
  std::vector<double> sigma;
};

/// The largest rank r for which the two factors, r * (rows + cols) values, take fewer values than
/// the matrix (rows * cols), capped at min(rows, cols); 0 when no rank saves anything.
int64_t max_saving_rank(int64_t rows, int64_t cols);

/// True when a rank-r factorisation takes fewer values than the dense matrix.
bool saves_bytes(int64_t rows, int64_t cols, int64_t rank);

/// The smallest r >= 1 keeping at least `energy` (0, 1] of sum sigma^2 (a relative slack of 1e-12
/// absorbs rounding in the sums).
int64_t rank_for_energy(const std::vector<double>& sigma, double energy);

/// The largest r whose factors take at most `ratio` of the matrix's values: floor(ratio * rows *
/// cols / (rows + cols)), capped at min(rows, cols). May be 0 (even rank 1 is over the target).
int64_t rank_for_bytes_ratio(int64_t rows, int64_t cols, double ratio);

/// One energy threshold over all layers: the globally largest sigma^2 are kept until they hold
/// `energy` of the total sum over every layer; each layer keeps at least rank 1.
std::vector<int64_t> global_ranks_for_energy(const std::vector<LayerSpectrum>& layers, double energy);

/// One budget over all layers: the factors of all layers together take at most `ratio` of the
/// layers' dense values. Every layer starts at rank 1; then the next singular value is added to the
/// layer where it keeps the most of that layer's own energy (sigma^2 / ||W||_F^2) per value it costs
/// (rows + cols), while it fits the budget and stays below max_saving_rank. A layer where no rank
/// saves values is left dense (rank 0) and counted at its dense size; so is a layer that reached its
/// max_saving_rank when the budget left covers the difference to its dense size.
std::vector<int64_t> global_ranks_for_bytes_ratio(const std::vector<LayerSpectrum>& layers, double ratio);

}  // namespace lathe
