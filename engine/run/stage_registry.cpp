// The stage registry (stage_registry.h): instances of the listed stages, sorted by their order.
#include "engine/run/stage_registry.h"

#include <algorithm>

#include "engine/core/error.h"

namespace lathe {

std::vector<std::unique_ptr<Stage>> make_stages() {
  std::vector<std::unique_ptr<Stage>> stages;
  for (StageFactory make : stage_factories())
    stages.push_back(make());
  std::stable_sort(stages.begin(), stages.end(), [](const auto& a, const auto& b) { return a->order() < b->order(); });
  for (size_t i = 0; i < stages.size(); ++i)
    for (size_t j = i + 1; j < stages.size(); ++j)
      LATHE_CHECK(stages[i]->section() != stages[j]->section(), "two stages own section ", stages[i]->section());
  return stages;
}

const std::vector<std::unique_ptr<Stage>>& stage_prototypes() {
  static const std::vector<std::unique_ptr<Stage>> prototypes = make_stages();
  return prototypes;
}

const Stage* find_stage(const std::string& section) {
  for (const auto& stage : stage_prototypes())
    if (stage->section() == section)
      return stage.get();
  return nullptr;
}

}  // namespace lathe
