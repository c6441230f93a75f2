// The low-rank stage (section lowrank, engine/run/stage.h): after training (and pruning), factor
// every Linear/Conv2d weight by truncated SVD into two smaller layers (factorize.h), fine-tune the
// factored model, and report from the same run the dense and factored accuracy, ranks, parameters,
// the real file size and the measured latency at batch 1 and 256.
#pragma once

#include <memory>

#include "engine/run/stage.h"

namespace lathe {

/// A fresh low-rank stage: the factory stage_list.cpp lists (it declares it there too, as it does for
/// every stage).
std::unique_ptr<Stage> new_lowrank_stage();

}  // namespace lathe
