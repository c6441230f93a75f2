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

int64_t optimizer_state_bytes(Optimizer& optimizer, const std::vector<NamedParam>& params) {
  int64_t bytes = 0;
  for (const auto& p : params)
    for (const Tensor* t : optimizer.state_of(p.param))
      bytes += static_cast<int64_t>(t->nbytes());
  return bytes;
}

}  // namespace lathe
