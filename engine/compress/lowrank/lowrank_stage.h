// The low-rank stage (section lowrank, engine/run/stage.h): after training (and pruning), factor
// every Linear/Conv2d weight by truncated SVD into two smaller layers (factorize.h), fine-tune the
// factored model, and report from the same run the dense and factored accuracy, ranks, parameters,
// the real file size and the measured latency at batch 1 and 256.
#pragma once

#include <memory>

#include "engine/run/stage.h"

namespace lathe {

/// A fresh low-rank stage, for the stage registry (stage_list.cpp).
std::unique_ptr<Stage> make_lowrank_stage();

}  // namespace lathe
