// ShardedOptimizer: ZeRO stage 1 over any Communicator. The parameters are partitioned whole
// among the ranks (greedy by size, largest first, to the least-loaded rank; ties to the lower
// rank), so each rank keeps optimizer state (momentum; Adam's m and v) only for the parameters it
// owns: about 1/N of the total. A step updates the owned parameters with the wrapped optimizer from
// the averaged gradients (all_reduce_gradients has run before, as in train_phase) and broadcasts
// each parameter's new value from its owner. The values equal the unsharded run's bit for bit.
// Checkpoints of a sharded run hold only the saving rank's shard (a known limit).
#pragma once

#include <memory>
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

 protected:
  std::vector<Tensor*> create_state(Backend& backend, const Param* param) override {
    return m_inner->create_state(backend, param);
  }

 private:
  std::shared_ptr<Optimizer> m_inner;
  std::shared_ptr<Communicator> m_comm;
};

/// Bytes of optimizer state this process holds for `params` (the mem/optimizer_bytes metric).
int64_t optimizer_state_bytes(Optimizer& optimizer, const std::vector<NamedParam>& params);

}  // namespace lathe
