// SGD and AdamW steps through the backend's fused update ops; the LR schedule formulas.
#include "engine/nn/optimizer.h"

#include <cmath>

#include "engine/core/error.h"

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

std::vector<Tensor*> Sgd::create_state(Backend& backend, const Param* param) {
  Tensor& buf = m_buf[param];
  buf = backend.zeros(param->value.shape(), param->value.dtype());
  return {&buf};
}

std::vector<Tensor*> AdamW::create_state(Backend& backend, const Param* param) {
  auto& st = m_state[param];
  st.first = backend.zeros(param->value.shape(), param->value.dtype());
  st.second = backend.zeros(param->value.shape(), param->value.dtype());
  return {&st.first, &st.second};
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors(Backend& backend,
                                                                     const std::vector<NamedParam>& params) {
  const std::vector<std::string> kinds = state_kinds();
  std::vector<std::pair<std::string, Tensor>> out;
  for (const NamedParam& np : params) {
    const std::vector<Tensor*> state = state_of(np.param);
    for (size_t i = 0; i < state.size() && i < kinds.size(); ++i) {
      // Always a copy: the checkpoint must not alias a buffer the next step overwrites.
      Tensor host = Tensor::empty(state[i]->shape(), state[i]->dtype());
      backend.copy(*state[i], host);
      out.emplace_back(np.name + "." + kinds[i], std::move(host));
    }
  }
  return out;
}

void Optimizer::load_state_tensors(Backend& backend, const std::vector<NamedParam>& params,
                                   const std::map<std::string, Tensor>& state, int64_t steps_taken) {
  const std::vector<std::string> kinds = state_kinds();
  size_t used = 0;
  for (const NamedParam& np : params) {
    const bool any = state.count(np.name + "." + kinds.front()) > 0;
    if (!any)
      continue;
    const std::vector<Tensor*> dst = create_state(backend, np.param);
    for (size_t i = 0; i < kinds.size(); ++i) {
      const std::string key = np.name + "." + kinds[i];
      auto it = state.find(key);
      if (it == state.end())
        throw DataError("optimizer state: '" + key + "' is missing (" + name() + " keeps " +
                        std::to_string(kinds.size()) + " tensors per parameter)");
      const Tensor& src = it->second;
      if (src.shape() != dst[i]->shape() || src.dtype() != dst[i]->dtype())
        throw DataError("optimizer state: '" + key + "' is " + shape_str(src.shape()) + " " +
                        std::string(dtype_name(src.dtype())) + ", the parameter needs " + shape_str(dst[i]->shape()) +
                        " " + std::string(dtype_name(dst[i]->dtype())));
      backend.copy(src, *dst[i]);
      ++used;
    }
  }
  if (used != state.size()) {
    for (const auto& [key, _] : state) {
      bool known = false;
      for (const NamedParam& np : params)
        for (const std::string& kind : kinds)
          known = known || key == np.name + "." + kind;
      if (!known)
        throw DataError("optimizer state: '" + key + "' belongs to no parameter of this model (" + name() + ")");
    }
  }
  m_steps = steps_taken;
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
