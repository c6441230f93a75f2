// "run:<ref>" through the run store: the model file an earlier run saved (its "model" artifact, or
// <runs_root>/<id>/model.safetensors when the artifact path was relative to another directory) and
// the run's config. lathe-cli hands this to the engine as a RunResolver (core/run_model_ref.h).
#pragma once

#include <string>

#include "engine/core/run_model_ref.h"

namespace lathe {

/// Opens the store at `store_path` and finds run `ref` (DataError naming the candidates) and its
/// model file (DataError naming `field` when there is none).
RunModelFile find_run_model(const std::string& store_path, const std::string& ref, const std::string& runs_root,
                            const std::string& field);

}  // namespace lathe
