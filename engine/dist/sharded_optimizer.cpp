// ShardedOptimizer and the flat partition (see sharded_optimizer.h).
#include "engine/dist/sharded_optimizer.h"

#include <algorithm>

#include "engine/core/error.h"

namespace lathe {

namespace {

/// `t`'s elements as one row (memory order), sharing its memory.
Tensor flat(const Tensor& t, const std::string& what) {
  LATHE_CHECK(t.defined() && t.is_contiguous(), "ShardedOptimizer: ", what, " is not a contiguous tensor");
  return t.view({t.numel()});
}

}  // namespace

FlatPartition FlatPartition::make(const std::vector<int64_t>& numels, int world_size) {
  LATHE_CHECK(world_size >= 1, "FlatPartition: world size ", world_size, " must be >= 1");
  const size_t world = static_cast<size_t>(world_size);
  std::vector<int64_t> start(numels.size() + 1, 0);
  for (size_t i = 0; i < numels.size(); ++i)
    start[i + 1] = start[i] + numels[i];
  const int64_t total = start.back();
  FlatPartition p;
  p.bounds.assign(world + 1, 0);
  p.bounds[world] = total;
  for (size_t r = 1; r < world; ++r) {
    const int64_t ideal = total * static_cast<int64_t>(r) / world_size;
    // The tensor the ideal cut falls in (start[i] <= ideal < start[i + 1]); the cut moves to the
    // nearest multiple of kShardAlign from that tensor's start, or to its end.
    const size_t i = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), ideal) - start.begin()) - 1;
    int64_t cut = ideal;
    if (i < numels.size()) {
      const int64_t aligned = (ideal - start[i] + kShardAlign / 2) / kShardAlign * kShardAlign;
      cut = start[i] + std::min(numels[i], aligned);
    }
    p.bounds[r] = std::clamp(cut, p.bounds[r - 1], total);
  }
  for (size_t i = 0; i < numels.size(); ++i)
    for (size_t r = 0; r < world; ++r) {
      const int64_t lo = std::max(start[i], p.bounds[r]), hi = std::min(start[i + 1], p.bounds[r + 1]);
      if (lo < hi)
        p.slices.push_back({i, static_cast<int>(r), lo - start[i], hi - start[i]});
    }
  return p;
}

ShardedOptimizer::ShardedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm)
    : m_inner(std::move(inner)), m_comm(std::move(comm)) {
  LATHE_CHECK(m_inner && m_comm, "ShardedOptimizer needs an optimizer and a communicator");
}

FlatPartition ShardedOptimizer::partition(const std::vector<NamedParam>& params, int world_size) {
  std::vector<int64_t> numels;
  numels.reserve(params.size());
  for (const NamedParam& p : params)
    numels.push_back(p.param->value.numel());
  return FlatPartition::make(numels, world_size);
}

void ShardedOptimizer::prepare(const std::vector<NamedParam>& params) {
  std::vector<std::pair<const Param*, int64_t>> key;
  key.reserve(params.size());
  for (const NamedParam& p : params)
    key.emplace_back(p.param, p.param->value.numel());
  if (!m_planned) {
    m_planned = true;
    m_key = key;
    m_part = partition(params, m_comm->world_size());
    for (const FlatPartition::Slice& s : m_part.slices)
      if (s.rank == m_comm->rank()) {
        Shard sh;
        sh.index = s.index;
        sh.of = params[s.index].param;
        sh.begin = s.begin;
        sh.end = s.end;
        sh.view = std::make_unique<Param>();
        sh.view->name = params[s.index].param->name;
        sh.name = params[s.index].name + "[" + std::to_string(s.begin) + ":" + std::to_string(s.end) + "]";
        m_shards.push_back(std::move(sh));
      }
    for (const Shard& sh : m_shards)
      m_shard_params.push_back({sh.name, sh.view.get()});
  } else if (key != m_key) {
    throw Error("ShardedOptimizer: called with other parameters (" + std::to_string(key.size()) +
                ") than it partitioned (" + std::to_string(m_key.size()) + "); one optimizer serves one model");
  }
  // The views follow the parameters' tensors, wherever they are now.
  for (Shard& sh : m_shards) {
    const std::string& name = params[sh.index].name;
    sh.view->value = flat(sh.of->value, "parameter " + name).slice0(sh.begin, sh.end);
    sh.view->grad =
        sh.of->grad.defined() ? flat(sh.of->grad, "the gradient of " + name).slice0(sh.begin, sh.end) : Tensor();
  }
}

const ShardedOptimizer::Shard* ShardedOptimizer::shard_of(const Param* param) const {
  for (const Shard& sh : m_shards)
    if (sh.of == param)
      return &sh;
  return nullptr;
}

std::vector<Tensor*> ShardedOptimizer::state_of(const Param* param) {
  const Shard* sh = shard_of(param);
  return sh ? m_inner->state_of(sh->view.get()) : std::vector<Tensor*>{};
}

int64_t ShardedOptimizer::state_offset(const Param* param) const {
  const Shard* sh = shard_of(param);
  return sh ? sh->begin : 0;
}

std::vector<Tensor*> ShardedOptimizer::create_state(Backend& backend, const Param* param) {
  const Shard* sh = shard_of(param);
  return sh ? m_inner->create_state(backend, sh->view.get()) : std::vector<Tensor*>{};
}

void ShardedOptimizer::step(Backend& backend, const std::vector<NamedParam>& params, double lr) {
  prepare(params);
  m_inner->m_steps = m_steps;  // after load_full_state (resume) too
  m_inner->step(backend, m_shard_params, lr);
  m_steps = m_inner->m_steps;
  backend.synchronize();
  // The all-gather: every slice from its owner.
  std::vector<Param> views(m_part.slices.size());
  std::vector<NamedParam> pieces;
  std::vector<int> owners;
  for (size_t k = 0; k < m_part.slices.size(); ++k) {
    const FlatPartition::Slice& s = m_part.slices[k];
    const NamedParam& p = params[s.index];
    views[k].value = flat(p.param->value, "parameter " + p.name).slice0(s.begin, s.end);
    pieces.push_back({p.name, &views[k]});
    owners.push_back(s.rank);
  }
  m_comm->all_gather_parameters(pieces, owners);
}

std::vector<std::pair<std::string, Tensor>> ShardedOptimizer::gathered_state_tensors(
    Backend& backend, const std::vector<NamedParam>& params) {
  prepare(params);
  const std::vector<std::string> kinds = m_inner->state_kinds();
  // Which parameters have state (none before their first step): only the owners know.
  std::vector<double> has(params.size(), 0.0);
  for (const Shard& sh : m_shards)
    if (!m_inner->state_of(sh.view.get()).empty())
      has[sh.index] = 1.0;
  m_comm->all_reduce_sum(has.data(), static_cast<int64_t>(has.size()));
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < params.size(); ++i) {
    if (has[i] == 0.0)
      continue;
    const Tensor& value = params[i].param->value;
    for (size_t k = 0; k < kinds.size(); ++k) {
      // A host tensor of the parameter's shape: each slice copied in by its owner, then broadcast.
      Tensor whole = Tensor::zeros(value.shape(), DType::f32);
      const Tensor row = whole.view({whole.numel()});
      for (const FlatPartition::Slice& s : m_part.slices) {
        if (s.index != i)
          continue;
        Param piece;
        piece.value = row.slice0(s.begin, s.end);
        if (s.rank == m_comm->rank()) {
          const Shard* sh = shard_of(params[i].param);
          const std::vector<Tensor*> mine = m_inner->state_of(sh->view.get());
          LATHE_CHECK(k < mine.size() && mine[k]->numel() == s.end - s.begin && mine[k]->dtype() == DType::f32,
                      "ShardedOptimizer: the state of ", sh->name, " is not an f32 tensor of its slice");
          backend.copy(*mine[k], piece.value);
        }
        m_comm->broadcast_parameters({NamedParam{params[i].name, &piece}}, s.rank);
      }
      out.emplace_back(params[i].name + "." + kinds[k], std::move(whole));
    }
  }
  return out;
}

void ShardedOptimizer::load_full_state(Backend& backend, const std::vector<NamedParam>& params,
                                       const std::map<std::string, Tensor>& state, int64_t steps_taken) {
  prepare(params);
  const std::vector<std::string> kinds = m_inner->state_kinds();
  // Every entry is the whole state of one parameter (a checkpoint of any world size holds those).
  for (const auto& [key, t] : state) {
    const NamedParam* owner = nullptr;
    for (const NamedParam& p : params)
      for (const std::string& kind : kinds)
        if (key == p.name + "." + kind)
          owner = &p;
    if (!owner)
      throw DataError("optimizer state: '" + key + "' belongs to no parameter of this model (" + name() + ")");
    const Tensor& v = owner->param->value;
    if (t.shape() != v.shape() || t.dtype() != v.dtype())
      throw DataError("optimizer state: '" + key + "' is " + shape_str(t.shape()) + " " +
                      std::string(dtype_name(t.dtype())) + ", the parameter needs " + shape_str(v.shape()) + " " +
                      std::string(dtype_name(v.dtype())));
    for (const std::string& kind : kinds)
      if (!state.count(owner->name + "." + kind))
        throw DataError("optimizer state: '" + owner->name + "." + kind + "' is missing (" + name() + " keeps " +
                        std::to_string(kinds.size()) + " tensors per parameter)");
  }
  std::map<std::string, Tensor> mine;
  for (const Shard& sh : m_shards)
    for (const std::string& kind : kinds) {
      auto it = state.find(params[sh.index].name + "." + kind);
      if (it == state.end())
        continue;
      const Tensor whole = it->second.is_contiguous() ? it->second : it->second.contiguous_copy();
      mine.emplace(sh.name + "." + kind, whole.view({whole.numel()}).slice0(sh.begin, sh.end));
    }
  m_inner->load_state_tensors(backend, m_shard_params, mine, steps_taken);
  m_steps = steps_taken;
}

int64_t optimizer_state_bytes(Optimizer& optimizer, const std::vector<NamedParam>& params) {
  int64_t bytes = 0;
  for (const auto& p : params)
    for (const Tensor* t : optimizer.state_of(p.param))
      bytes += static_cast<int64_t>(t->nbytes());
  return bytes;
}

}  // namespace lathe
