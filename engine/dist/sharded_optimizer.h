// ShardedOptimizer: ZeRO stage 1 over any Communicator, with DeepSpeed's flat partition. The
// parameters, concatenated in model order as one flat space of elements, are cut into N contiguous
// ranges of ~1/N each (the cuts at multiples of kShardAlign elements from the start of the tensor
// they fall in, so a cut may split a tensor); rank r keeps optimizer state (momentum; Adam's m and
// v) only for the elements of its range: 1/N of the total within one alignment unit, however
// unequal the tensors (the cnn's first dense weight is 95% of its parameters). A step updates this
// rank's slices (1-D views into the parameters and their averaged gradients; all_reduce_gradients
// has run before, as in train_phase) with the wrapped optimizer, then every slice goes from its
// owner to every rank (Communicator::all_gather_parameters: one shared-memory sum on Gloo ranks
// that share a machine, else a broadcast per owner). The update is elementwise, so the values equal the unsharded
// run's. For a checkpoint, gathered_state_tensors() assembles every parameter's whole state on every rank (a
// collective), so rank 0 writes the same "<param>.<kind>" tensors an unsharded run writes and a checkpoint does not
// depend on the world size or on this partition; load_full_state() takes such whole tensors (from any writer) and keeps
// this rank's slices.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/exec/communicator.h"
#include "engine/nn/optimizer.h"

namespace lathe {

/// Cuts fall at multiples of this many elements (64 bytes of f32) from their tensor's start.
constexpr int64_t kShardAlign = 16;

/// The flat partition of parameters of `numels` elements among `world_size` ranks.
struct FlatPartition {
  /// Elements [begin, end) of tensor `index` (memory order), owned by `rank`.
  struct Slice {
    size_t index = 0;
    int rank = 0;
    int64_t begin = 0, end = 0;
  };
  /// world_size + 1 cuts in the flat space: rank r owns [bounds[r], bounds[r + 1]).
  std::vector<int64_t> bounds;
  /// The non-empty slices, in flat order (so by tensor, then by rank).
  std::vector<Slice> slices;

  static FlatPartition make(const std::vector<int64_t>& numels, int world_size);
  /// Elements rank `r` owns.
  int64_t owned(int r) const { return bounds.at(static_cast<size_t>(r) + 1) - bounds.at(static_cast<size_t>(r)); }
};

class ShardedOptimizer final : public Optimizer {
 public:
  ShardedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm);
  void step(Backend& backend, const std::vector<NamedParam>& params, double lr) override;
  std::string name() const override { return m_inner->name(); }
  /// The state of this rank's slice of `param`: 1-D tensors of the slice's length, starting at
  /// element state_offset(param) of the parameter (memory order); none where it owns none of it.
  std::vector<Tensor*> state_of(const Param* param) override;
  int64_t state_offset(const Param* param) const override;
  std::vector<std::string> state_kinds() const override { return m_inner->state_kinds(); }

  Optimizer& inner() { return *m_inner; }
  /// The partition this optimizer uses for `params` (the same on every rank).
  static FlatPartition partition(const std::vector<NamedParam>& params, int world_size);
  /// Optimizer::state_tensors() of the unsharded optimizer: every parameter's whole state, each
  /// slice from its owner. A collective (every rank calls it at the same point); host copies.
  std::vector<std::pair<std::string, Tensor>> gathered_state_tensors(Backend& backend,
                                                                     const std::vector<NamedParam>& params);
  /// Restores whole "<param>.<kind>" tensors (what gathered_state_tensors() or an unsharded
  /// optimizer's state_tensors() gave; any world size or partition wrote them): keeps this rank's
  /// slices and the step counter. Throws DataError naming the tensor on a name that is no
  /// parameter's, a wrong shape or dtype, or a missing kind.
  void load_full_state(Backend& backend, const std::vector<NamedParam>& params,
                       const std::map<std::string, Tensor>& state, int64_t steps_taken);

 protected:
  std::vector<Tensor*> create_state(Backend& backend, const Param* param) override;

 private:
  /// This rank's slices as parameters of their own (value and grad: 1-D views into the model's
  /// tensors), which the wrapped optimizer keys its state by, so their addresses never change.
  struct Shard {
    size_t index = 0;  // of the parameter in `params`
    const Param* of = nullptr;
    int64_t begin = 0, end = 0;
    std::unique_ptr<Param> view;
    std::string name;  // "<param>[begin:end]"
  };
  /// Builds the partition on first use, checks that `params` are the ones it was built for, and
  /// points the shards' views at the parameters' current tensors.
  void prepare(const std::vector<NamedParam>& params);
  const Shard* shard_of(const Param* param) const;

  std::shared_ptr<Optimizer> m_inner;
  std::shared_ptr<Communicator> m_comm;
  bool m_planned = false;
  std::vector<std::pair<const Param*, int64_t>> m_key;  // the parameters the partition is for
  FlatPartition m_part;
  std::vector<Shard> m_shards;
  std::vector<NamedParam> m_shard_params;
};

/// Bytes of optimizer state this process holds for `params` (the mem/optimizer_bytes metric).
int64_t optimizer_state_bytes(Optimizer& optimizer, const std::vector<NamedParam>& params);

}  // namespace lathe
