// LossScaler: dynamic loss scaling for f16 training, with PyTorch GradScaler semantics. The loss
// gradient is multiplied by scale() so that small f16 gradients do not underflow; before the
// optimizer step the f32 master gradients are unscaled and checked: any inf/nan skips the step and
// backs the scale off, and after growth_interval good steps in a row the scale grows.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/nn/model.h"

namespace lathe {

struct LossScaleOptions {
  double init_scale = 65536.0;     // 2^16, as torch.cuda.amp.GradScaler
  double growth_factor = 2.0;      // scale *= growth_factor after growth_interval good steps
  double backoff_factor = 0.5;     // scale *= backoff_factor on a step with inf/nan gradients
  int64_t growth_interval = 2000;  // good steps in a row before growing
};

class LossScaler {
 public:
  /// Throws ConfigError naming the field when an option is out of range.
  explicit LossScaler(LossScaleOptions options = {});

  /// The factor the loss (its gradient) is multiplied by for the current step.
  double scale() const { return m_scale; }
  const LossScaleOptions& options() const { return m_options; }

  /// Records the outcome of one step and adjusts the scale. Returns true when the optimizer step
  /// must run (the gradients were finite), false when it must be skipped.
  bool update(bool found_inf);

  /// Divides every parameter gradient by scale() (the f32 master gradients) and reports whether
  /// any was inf or nan. Does not change the scale: pass the result to update().
  bool unscale_and_check(Backend& backend, const std::vector<NamedParam>& params) const;

  /// unscale_and_check, then update: the whole before-the-step hook. True = take the step.
  bool unscale_and_update(Backend& backend, const std::vector<NamedParam>& params);

  int64_t steps_skipped() const { return m_skipped; }
  int64_t good_steps_in_a_row() const { return m_growth_tracker; }

  /// Puts back what scale(), good_steps_in_a_row() and steps_skipped() said (a checkpoint's state).
  void restore(double scale, int64_t good_steps_in_a_row, int64_t steps_skipped) {
    m_scale = scale;
    m_growth_tracker = good_steps_in_a_row;
    m_skipped = steps_skipped;
  }

 private:
  LossScaleOptions m_options;
  double m_scale;
  int64_t m_growth_tracker = 0;
  int64_t m_skipped = 0;
};

}  // namespace lathe
