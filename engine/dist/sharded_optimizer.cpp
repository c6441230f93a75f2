// ShardedOptimizer (see sharded_optimizer.h).
#include "engine/dist/sharded_optimizer.h"

#include <algorithm>
#include <numeric>

#include "engine/core/error.h"

namespace lathe {

ShardedOptimizer::ShardedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<Communicator> comm)
    : m_inner(std::move(inner)), m_comm(std::move(comm)) {
  LATHE_CHECK(m_inner && m_comm, "ShardedOptimizer needs an optimizer and a communicator");
}

std::vector<int> ShardedOptimizer::partition(const std::vector<NamedParam>& params, int world_size) {
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params[a].param->value.numel() > params[b].param->value.numel(); });
  std::vector<int64_t> load(static_cast<size_t>(std::max(1, world_size)), 0);
  std::vector<int> owner(params.size(), 0);
  for (size_t i : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = r;
    load[static_cast<size_t>(r)] += params[i].param->value.numel();
  }
  return owner;
}

void ShardedOptimizer::step(Backend& backend, const std::vector<NamedParam>& params, double lr) {
  const int world = m_comm->world_size();
  const std::vector<int> owner = partition(params, world);
  std::vector<std::vector<NamedParam>> by_rank(static_cast<size_t>(world));
  for (size_t i = 0; i < params.size(); ++i)
    by_rank[static_cast<size_t>(owner[i])].push_back(params[i]);
  m_inner->m_steps = m_steps;  // after load_state_tensors (resume) too
  m_inner->step(backend, by_rank[static_cast<size_t>(m_comm->rank())], lr);
  m_steps = m_inner->m_steps;
  backend.synchronize();
  for (int r = 0; r < world; ++r)
    if (!by_rank[static_cast<size_t>(r)].empty())
      m_comm->broadcast_parameters(by_rank[static_cast<size_t>(r)], r);
}

std::vector<std::pair<std::string, Tensor>> ShardedOptimizer::gathered_state_tensors(
    Backend& backend, const std::vector<NamedParam>& params) {
  const int world = m_comm->world_size(), me = m_comm->rank();
  const std::vector<int> owner = partition(params, world);
  const std::vector<std::string> kinds = m_inner->state_kinds();
  // Which parameters have state (none before their first step): only the owner knows.
  std::vector<double> has(params.size(), 0.0);
  for (size_t i = 0; i < params.size(); ++i)
    if (owner[i] == me && !m_inner->state_of(params[i].param).empty())
      has[i] = 1.0;
  m_comm->all_reduce_sum(has.data(), static_cast<int64_t>(has.size()));
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < params.size(); ++i) {
    if (has[i] == 0.0)
      continue;
    const std::vector<Tensor*> mine = owner[i] == me ? m_inner->state_of(params[i].param) : std::vector<Tensor*>{};
    const Tensor& value = params[i].param->value;
    for (size_t k = 0; k < kinds.size(); ++k) {
      // A host staging tensor of the parameter's shape: the owner's state, zeros elsewhere, then
      // the owner's broadcast fills it on every rank.
      Param staging;
      staging.value = Tensor::zeros(value.shape(), DType::f32);
      if (owner[i] == me) {
        LATHE_CHECK(k < mine.size() && mine[k]->shape() == value.shape() && mine[k]->dtype() == DType::f32,
                    "ShardedOptimizer: the state of " + params[i].name + " is not an f32 tensor of its shape");
        backend.copy(*mine[k], staging.value);
      }
      const std::string name = params[i].name + "." + kinds[k];
      m_comm->broadcast_parameters({NamedParam{name, &staging}}, owner[i]);
      out.emplace_back(name, std::move(staging.value));
    }
  }
  return out;
}

std::map<std::string, Tensor> owned_state(const std::map<std::string, Tensor>& state,
                                          const std::vector<NamedParam>& params, int rank, int world_size) {
  const std::vector<int> owner = ShardedOptimizer::partition(params, world_size);
  std::map<std::string, Tensor> out;
  for (const auto& [key, t] : state)
    for (size_t i = 0; i < params.size(); ++i)
      if (owner[i] == rank && key.rfind(params[i].name + ".", 0) == 0 &&
          key.find('.', params[i].name.size() + 1) == std::string::npos) {
        out.emplace(key, t);
        break;
      }
  return out;
}

int64_t optimizer_state_bytes(Optimizer& optimizer, const std::vector<NamedParam>& params) {
  int64_t bytes = 0;
  for (const auto& p : params)
    for (const Tensor* t : optimizer.state_of(p.param))
      bytes += static_cast<int64_t>(t->nbytes());
  return bytes;
}

}  // namespace lathe
