// The stage registry, keyed by config section. stage_list.cpp names every stage (one declaration and
// one list entry each: an explicit list, so no registration object can be dropped by the linker of a
// static library); everything else asks this registry and names no stage.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/run/stage.h"

namespace lathe {

/// Makes a fresh stage (one per run: a stage keeps its run's state).
using StageFactory = std::unique_ptr<Stage> (*)();

/// Every stage's factory, as listed in stage_list.cpp.
const std::vector<StageFactory>& stage_factories();

/// One instance of every stage, sorted by order(), for what does not run (schema, parsing, plans).
const std::vector<std::unique_ptr<Stage>>& stage_prototypes();

/// Fresh instances of every stage, sorted by order(): the pipeline of one run.
std::vector<std::unique_ptr<Stage>> make_stages();

/// The stage owning `section`, or nullptr.
const Stage* find_stage(const std::string& section);

}  // namespace lathe
