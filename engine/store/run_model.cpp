// find_run_model (run_model.h): a run's saved model file and config, through the store.
#include "engine/store/run_model.h"

#include <filesystem>

#include "engine/core/error.h"
#include "engine/store/store.h"

namespace lathe {

namespace fs = std::filesystem;

RunModelFile find_run_model(const std::string& store_path, const std::string& ref, const std::string& runs_root,
                            const std::string& field) {
  Store store = Store::open(store_path);
  RunModelFile m;
  m.run_id = store.resolve_run(ref);  // DataError naming the candidates
  const RunRecord rec = store.run(m.run_id);
  for (const ArtifactRecord& a : store.artifacts(m.run_id))
    if (a.kind == "model")
      m.weights_path = a.path;
  // Artifact paths are as the writing run saw them (often relative to its working directory).
  const fs::path fallback = fs::path(runs_root) / m.run_id / "model.safetensors";
  if ((m.weights_path.empty() || !fs::exists(m.weights_path)) && fs::exists(fallback))
    m.weights_path = fallback.string();
  if (m.weights_path.empty() || !fs::exists(m.weights_path))
    throw DataError(field + ": run " + m.run_id + " in " + store_path + " has no model file to load (artifact \"" +
                    m.weights_path + "\", or " + fallback.string() +
                    "); was it run with train.save_model = false, or from another working directory?");
  m.config_json = rec.config_json;
  m.origin = "store artifact of run " + m.run_id;
  return m;
}

}  // namespace lathe
