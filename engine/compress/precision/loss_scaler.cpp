// Dynamic loss scaling (see loss_scaler.h); the transitions follow torch.cuda.amp.GradScaler.update.
#include "engine/compress/precision/loss_scaler.h"

#include <cmath>
#include <sstream>

namespace lathe {

namespace {
void require(bool ok, const char* field, double value, const char* allowed) {
  if (ok)
    return;
  std::ostringstream os;
  os << field << ": " << value << " is out of range; allowed: " << allowed;
  throw ConfigError(os.str());
}
}  // namespace

LossScaler::LossScaler(LossScaleOptions options) : m_options(options), m_scale(options.init_scale) {
  require(std::isfinite(options.init_scale) && options.init_scale > 0, "train.loss_scale.init", options.init_scale,
          "a finite number > 0");
  require(std::isfinite(options.growth_factor) && options.growth_factor >= 1, "train.loss_scale.growth_factor",
          options.growth_factor, "a finite number >= 1");
  require(options.backoff_factor > 0 && options.backoff_factor < 1, "train.loss_scale.backoff_factor",
          options.backoff_factor, "a number in (0, 1)");
  require(options.growth_interval >= 1, "train.loss_scale.growth_interval",
          static_cast<double>(options.growth_interval), "an integer >= 1");
}

bool LossScaler::update(bool found_inf) {
  if (found_inf) {
    m_scale *= m_options.backoff_factor;
    m_growth_tracker = 0;
    ++m_skipped;
    return false;
  }
  if (++m_growth_tracker == m_options.growth_interval) {
    const double grown = m_scale * m_options.growth_factor;
    if (std::isfinite(grown))  // GradScaler keeps the old scale when growing would overflow
      m_scale = grown;
    m_growth_tracker = 0;
  }
  return true;
}

bool LossScaler::unscale_and_check(Backend& backend, const std::vector<NamedParam>& params) const {
  const double inv = 1.0 / m_scale;
  bool found_inf = false;
  for (const NamedParam& p : params) {
    Tensor& g = p.param->grad;
    // A sum of squares is inf/nan exactly when an element is (in double, f32 squares cannot overflow).
    if (!std::isfinite(backend.sum_squares(g)))
      found_inf = true;
    backend.scale(g, inv);
  }
  return found_inf;
}

bool LossScaler::unscale_and_update(Backend& backend, const std::vector<NamedParam>& params) {
  return update(unscale_and_check(backend, params));
}

}  // namespace lathe
