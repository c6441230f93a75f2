// The lowrank.* config section: its schema fields (declared by the stage, so validation, --help
// and the GUI form pick them up) and its typed form, parsed from the validated config.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "engine/compress/lowrank/factorize.h"
#include "engine/run/config.h"
#include "engine/run/config_schema.h"

namespace lathe {

enum class LowRankMethod { none, svd };

/// lowrank.* as typed values.
struct LowRankConfig final : StageConfig {
  LowRankMethod method = LowRankMethod::none;
  LowRankOptions options;  ///< rank, energy, target_bytes_ratio, scope, exclude
  int64_t finetune_epochs = 1;
  double finetune_lr_scale = 0.25;  ///< fine-tuning lr = train.optimizer.lr x this
};

/// The section's fields, paths "lowrank.<name>", in display order.
std::vector<FieldSpec> lowrank_schema_fields();

/// Reads `validated["lowrank"]` (defaults already filled in by validate_config) and checks the rules
/// that span fields; ConfigError naming the field, the value and what is allowed.
LowRankConfig parse_lowrank_config(const nlohmann::json& validated);

}  // namespace lathe
