// The list of stages, in one place: a stage is one declaration and one entry below. An explicit
// list rather than self-registering objects, because the linker drops an object file of a static
// library that nothing references (and its registration with it).
#include "engine/run/stage_registry.h"

namespace lathe {

std::unique_ptr<Stage> new_distill_stage();    // engine/run/stage_distill.cpp
std::unique_ptr<Stage> new_precision_stage();  // engine/run/stage_precision.cpp
std::unique_ptr<Stage> new_prune_stage();      // engine/run/stage_prune.cpp
std::unique_ptr<Stage> new_quantize_stage();   // engine/run/stage_quantize.cpp

const std::vector<StageFactory>& stage_factories() {
  static const std::vector<StageFactory> factories{
      new_distill_stage,
      new_precision_stage,
      new_prune_stage,
      new_quantize_stage,
  };
  return factories;
}

}  // namespace lathe
