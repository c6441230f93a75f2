// The deployed form of an unstructured-pruned model: swaps a SparseLinear / SparseConv2d executor
// in for every pruned Linear / Conv2d of a Model (CPU only), so the same Model object runs and is
// timed as the compressed model; restore() (or the destructor) swaps the dense layers back, so
// later pipeline stages see the masked dense model again.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/compress/prune/sparse_layers.h"
#include "engine/nn/model.h"

namespace lathe {

struct SparseDeploymentOptions {
  /// Layers whose weight density is above this stay dense without a sparse executor (no point in
  /// timing a kernel that cannot win on a nearly dense weight).
  double max_density = 0.95;
  SparseKernelMode mode = SparseKernelMode::measured;
};

class SparseDeployment {
 public:
  /// Throws lathe::Error when `model` lives on a non-CPU device (the sparse kernels are host code).
  SparseDeployment(Model& model, const SparseDeploymentOptions& options = {});
  ~SparseDeployment();
  SparseDeployment(const SparseDeployment&) = delete;
  SparseDeployment& operator=(const SparseDeployment&) = delete;

  struct Swapped {
    size_t node;
    std::string name;              ///< node name, "0"
    SparseExecutor* executor;      ///< owned by the model while deployed
    std::unique_ptr<Layer> dense;  ///< the original layer, put back by restore()
  };
  const std::vector<Swapped>& layers() const { return m_swapped; }
  /// Puts the dense layers back (idempotent).
  void restore();
  /// One line per layer: density, and per measured batch size dense vs sparse ms and the choice.
  std::string describe_choices() const;

 private:
  Model& m_model;
  std::vector<Swapped> m_swapped;
};

}  // namespace lathe
