// ShardedOptimizer: ZeRO stage 1 over any Communicator. The parameters are partitioned whole
// among the ranks (greedy by size, largest first, to the least-loaded rank; ties to the lower
// rank), so each rank keeps optimizer state (momentum; Adam's m and v) only for the parameters it
// owns: about 1/N of the total. A step updates the owned parameters with the wrapped optimizer from
// the averaged gradients (all_reduce_gradients has run before, as in train_phase) and broadcasts
// each parameter's new value from its owner. The values equal the unsharded run's bit for bit.
// For a checkpoint, gathered_state_tensors() brings every shard to every rank (a collective), so rank
// 0 writes the whole optimizer state and the checkpoint does not depend on the world size; a resumed
// rank keeps only the state of the parameters it owns (owned_state).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/exec/communicator.h"
#include "engine/nn/optimizer.h"

namespace lathe {

class ShardedOptimizer final : public Optimizer {
 public:
  ShardedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm);
  void step(Backend& backend, const std::vector<NamedParam>& params, double lr) override;
  std::string name() const override { return m_inner->name(); }
  std::vector<Tensor*> state_of(const Param* param) override { return m_inner->state_of(param); }
  std::vector<std::string> state_kinds() const override { return m_inner->state_kinds(); }

  /// The rank that owns params[i] (the partition described above; the same on every rank).
  static std::vector<int> partition(const std::vector<NamedParam>& params, int world_size);
  Optimizer& inner() { return *m_inner; }
  /// Optimizer::state_tensors() of every parameter, each from the rank that owns it: a collective
  /// (every rank calls it at the same point), host copies on every rank.
  std::vector<std::pair<std::string, Tensor>> gathered_state_tensors(Backend& backend,
                                                                     const std::vector<NamedParam>& params);

 protected:
  std::vector<Tensor*> create_state(Backend& backend, const Param* param) override {
    return m_inner->create_state(backend, param);
  }

 private:
  std::shared_ptr<Optimizer> m_inner;
  std::shared_ptr<Communicator> m_comm;
};

/// The entries of `state` ("<param>.<kind>", as state_tensors() names them) of the parameters that
/// `rank` owns under partition(params, world_size): what a resumed rank of a sharded run loads.
std::map<std::string, Tensor> owned_state(const std::map<std::string, Tensor>& state,
                                          const std::vector<NamedParam>& params, int rank, int world_size);

/// Bytes of optimizer state this process holds for `params` (the mem/optimizer_bytes metric).
int64_t optimizer_state_bytes(Optimizer& optimizer, const std::vector<NamedParam>& params);

}  // namespace lathe
