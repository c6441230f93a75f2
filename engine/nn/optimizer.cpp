// SGD and AdamW steps through the backend's fused update ops; the LR schedule formulas.
#include "engine/nn/optimizer.h"

#include <cmath>

namespace lathe {

void Sgd::step(Backend& backend, const std::vector<NamedParam>& params, double lr) {
  const SgdParams p{lr, m_momentum, m_wd, m_nesterov};
  for (const NamedParam& np : params) {
    Tensor& buf = m_buf[np.param];
    if (m_momentum != 0 && !buf.defined())
      buf = backend.zeros(np.param->value.shape(), np.param->value.dtype());
    backend.sgd_update(p, np.param->value, np.param->grad, buf);
  }
  ++m_steps;
}

void AdamW::step(Backend& backend, const std::vector<NamedParam>& params, double lr) {
  ++m_steps;
  AdamWParams p;
  p.lr = lr;
  p.beta1 = m_b1;
  p.beta2 = m_b2;
  p.eps = m_eps;
  p.weight_decay = m_wd;
  p.step = m_steps;
  for (const NamedParam& np : params) {
    auto& st = m_state[np.param];
    if (!st.first.defined()) {
      st.first = backend.zeros(np.param->value.shape(), np.param->value.dtype());
      st.second = backend.zeros(np.param->value.shape(), np.param->value.dtype());
    }
    backend.adamw_update(p, np.param->value, np.param->grad, st.first, st.second);
  }
}

std::vector<Tensor*> Sgd::state_of(const Param* param) {
  auto it = m_buf.find(param);
  if (it == m_buf.end() || !it->second.defined())
    return {};
  return {&it->second};
}

std::vector<Tensor*> AdamW::state_of(const Param* param) {
  auto it = m_state.find(param);
  if (it == m_state.end())
    return {};
  return {&it->second.first, &it->second.second};
}

double LrSchedule::at(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps)
    return base_lr * static_cast<double>(step + 1) / warmup_steps;
  const int64_t s = step - warmup_steps;
  switch (type) {
    case Type::constant:
      return base_lr;
    case Type::step:
      return base_lr * std::pow(gamma, static_cast<double>(s / std::max<int64_t>(step_every, 1)));
    case Type::cosine: {
      const int64_t span = std::max<int64_t>(total_steps - warmup_steps, 1);
      const double t = std::min(1.0, static_cast<double>(s) / span);
      return min_lr + 0.5 * (base_lr - min_lr) * (1 + std::cos(3.141592653589793 * t));
    }
  }
  return base_lr;
}

}  // namespace lathe
