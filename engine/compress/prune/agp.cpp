// The AGP cubic sparsity schedule, held constant between update steps.
#include "engine/compress/prune/agp.h"

#include <string>

#include "engine/core/error.h"

namespace lathe {

void AgpSchedule::validate() const {
  if (!(initial >= 0.0 && initial <= final && final <= 1.0))
    throw ConfigError("prune.schedule: initial " + std::to_string(initial) + " and final " + std::to_string(final) +
                      " sparsity must satisfy 0 <= initial <= final <= 1");
  if (start < 0 || end <= start)
    throw ConfigError("prune.schedule: start " + std::to_string(start) + " and end " + std::to_string(end) +
                      " must satisfy 0 <= start < end");
  if (frequency <= 0)
    throw ConfigError("prune.schedule.frequency: " + std::to_string(frequency) + " must be a positive step count");
}

double AgpSchedule::at(int64_t step) const {
  if (step < start)
    return initial;
  if (step >= end)
    return final;
  const int64_t t = start + (step - start) / frequency * frequency;  // the last update step
  const double r = 1.0 - static_cast<double>(t - start) / static_cast<double>(end - start);
  return final + (initial - final) * r * r * r;
}

bool AgpSchedule::update_at(int64_t step) const {
  if (step < start || step > end)
    return false;
  return step == end || (step - start) % frequency == 0;
}

}  // namespace lathe
