// The communicator seam of the training loop (as llm.c's zero.cuh): the calls data-parallel
// training needs, made by train_phase and the evaluation at the right points today, so that a
// multi-process implementation (NCCL, MPI, ...) only adds a class. With one process every call is
// a no-op (LocalCommunicator), so results are those of the plain loop bit for bit.
//   broadcast_parameters  at the start of every training phase (every rank starts from rank 0's weights)
//   all_reduce_gradients  after a step's micro-batches have completed its gradients, before the
//                         hooks that read them (loss-scaler check, pruning masks) and the update
//   all_reduce_sum        the evaluation's loss and correct-count sums (each rank scores its shard)
//   barrier               for callers that need every rank at one point (none in the loop: only
//                         rank 0 writes files, and every rank holds the same weights)
#pragma once

#include <cstdint>
#include <vector>

#include "engine/nn/model.h"

namespace lathe {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Replaces every parameter's gradient with its mean over the ranks.
  virtual void all_reduce_gradients(const std::vector<NamedParam>& params) = 0;
  /// Copies rank `root`'s parameter values into every rank's parameters.
  virtual void broadcast_parameters(const std::vector<NamedParam>& params, int root) = 0;
  /// Replaces values[0..n) with their sums over the ranks.
  virtual void all_reduce_sum(double* values, int64_t n) = 0;
  /// Returns once every rank has called it.
  virtual void barrier() = 0;
  /// Gradient payload bytes this rank sent in the last all_reduce_gradients (0 = not counted).
  virtual int64_t bytes_last_step() const { return 0; }
};

/// One process: rank 0 of 1; every call leaves everything as it is.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_gradients(const std::vector<NamedParam>&) override {}
  void broadcast_parameters(const std::vector<NamedParam>&, int) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void barrier() override {}
};

}  // namespace lathe
