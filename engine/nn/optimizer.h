// Optimizers over a model's parameters: SGD (momentum, weight decay, Nesterov) and AdamW, with their
// state kept per parameter on the parameter's device. PyTorch semantics, so runs compare like for like.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/nn/model.h"

namespace lathe {

class ShardedOptimizer;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// One update of every parameter from its gradient, at learning rate `lr`.
  virtual void step(Backend& backend, const std::vector<NamedParam>& params, double lr) = 0;
  virtual std::string name() const = 0;
  /// Every state tensor kept for `param` (momentum; AdamW's m and v), none before its first step.
  /// Pruning zeroes the pruned entries here too, or momentum would move them off zero again.
  virtual std::vector<Tensor*> state_of(const Param* param) = 0;
  /// Where state_of(param)'s tensors start among `param`'s elements (memory order): 0, as they
  /// have its shape, except in a ZeRO-1 optimizer, which keeps 1-D slices (sharded_optimizer.h).
  virtual int64_t state_offset(const Param*) const { return 0; }
  int64_t steps_taken() const { return m_steps; }

  /// The state as named host copies, for checkpoints: "<param>.<kind>" with kind from
  /// state_kinds() (PyTorch's names: momentum_buffer; exp_avg, exp_avg_sq), in `params` order;
  /// parameters without state yet (before the first step, or SGD without momentum) are left out.
  std::vector<std::pair<std::string, Tensor>> state_tensors(Backend& backend, const std::vector<NamedParam>& params);
  /// Restores what state_tensors() gave (and the step counter), so the next step equals the one
  /// the saved optimizer would have taken, bit for bit. A parameter absent from `state` gets no
  /// state (as before its first step). Throws DataError naming the tensor on a missing kind, a
  /// wrong shape or dtype, or a name that is no parameter's.
  void load_state_tensors(Backend& backend, const std::vector<NamedParam>& params,
                          const std::map<std::string, Tensor>& state, int64_t steps_taken);
  /// The names of the per-parameter state tensors, in state_of() order.
  virtual std::vector<std::string> state_kinds() const = 0;

 protected:
  friend class ShardedOptimizer;  // engine/dist/sharded_optimizer.h: forwards to the optimizer it wraps
  /// Creates zeroed state for `param` (as its first step does) and returns it, in state_of() order.
  virtual std::vector<Tensor*> create_state(Backend& backend, const Param* param) = 0;
  int64_t m_steps = 0;
};

class Sgd final : public Optimizer {
 public:
  Sgd(double momentum, double weight_decay, bool nesterov)
      : m_momentum(momentum), m_wd(weight_decay), m_nesterov(nesterov) {}
  void step(Backend& backend, const std::vector<NamedParam>& params, double lr) override;
  std::string name() const override { return "sgd"; }
  std::vector<Tensor*> state_of(const Param* param) override;
  std::vector<std::string> state_kinds() const override { return {"momentum_buffer"}; }

 protected:
  std::vector<Tensor*> create_state(Backend& backend, const Param* param) override;

 private:
  double m_momentum, m_wd;
  bool m_nesterov;
  std::unordered_map<const Param*, Tensor> m_buf;
};

class AdamW final : public Optimizer {
 public:
  AdamW(double beta1, double beta2, double eps, double weight_decay)
      : m_b1(beta1), m_b2(beta2), m_eps(eps), m_wd(weight_decay) {}
  void step(Backend& backend, const std::vector<NamedParam>& params, double lr) override;
  std::string name() const override { return "adamw"; }
  std::vector<Tensor*> state_of(const Param* param) override;
  std::vector<std::string> state_kinds() const override { return {"exp_avg", "exp_avg_sq"}; }

 protected:
  std::vector<Tensor*> create_state(Backend& backend, const Param* param) override;

 private:
  double m_b1, m_b2, m_eps, m_wd;
  std::unordered_map<const Param*, std::pair<Tensor, Tensor>> m_state;
};

/// Learning-rate schedule: optional linear warm-up from 0, then constant, step decay or cosine.
struct LrSchedule {
  enum class Type { constant, step, cosine } type = Type::constant;
  double base_lr = 0.01;
  int64_t warmup_steps = 0;
  int64_t step_every = 1;  // steps between decays (type step)
  double gamma = 0.1;
  double min_lr = 0;
  int64_t total_steps = 1;  // for cosine

  /// Learning rate for the optimizer step numbered `step` (0-based).
  double at(int64_t step) const;
};

}  // namespace lathe
