// Builds a validated experiment config from `key=value` overrides (every other field its default),
// as `lathe-cli run --set` would.
#pragma once

#include <string>
#include <vector>

#include "engine/run/config.h"

namespace lathe::test {

inline ExperimentConfig config_from(const std::vector<std::string>& sets) {
  nlohmann::json cfg = nlohmann::json::object();
  for (const std::string& s : sets)
    apply_override(cfg, s);
  return parse_experiment(validate_config(cfg));
}

}  // namespace lathe::test
