// Run identity and folder: ids like 20261202-141503-3fa9c1, and runs/<id>/ holding config.json,
// metrics.jsonl and model.safetensors. The folder is only created once the run is ready to start,
// so a config or dataset error leaves nothing behind.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/core/file_write.h"  // write_file_atomic, used for config.json

namespace lathe {

/// A new id: local time to the second plus 6 random hex digits.
std::string make_run_id();
/// Creates `<root>/<id>/` (and `root`) and returns its absolute path; throws DataError when it cannot,
/// or when it already exists.
std::string create_run_dir(const std::string& root, const std::string& id);

}  // namespace lathe
