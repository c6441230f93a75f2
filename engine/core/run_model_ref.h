// A model file saved by an earlier run ("run:<ref>" in a config, e.g. distill.teacher), as found by
// whoever knows where runs are recorded. The engine's consumers never open the run store: the
// caller passes a RunResolver in (lathe-cli resolves through the store, engine/store/run_model.h).
#pragma once

#include <functional>
#include <string>

namespace lathe {

struct RunModelFile {
  std::string run_id;
  std::string weights_path;  ///< the run's model.safetensors
  std::string config_json;   ///< the run's whole config (its model section builds the model)
  std::string origin;        ///< how it was found, for the run's events ("store artifact of run X")
};

/// Resolves the <ref> of "run:<ref>" (run id, unique id prefix or name); throws DataError naming
/// `field` and what was looked for.
using RunResolver = std::function<RunModelFile(const std::string& ref, const std::string& field)>;

}  // namespace lathe
