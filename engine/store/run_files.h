// Deleting a run's files without trusting what the store says about them. A store can be edited
// (or copied from elsewhere), so its artifact paths are claims: a file is removed only when it lies
// inside the run's own folder (a folder named by the run id, resolved with symlinks followed) and
// is provably the run's: an artifact whose size and sha256 match the record, the config.json that
// equals the stored config, the metrics.jsonl whose first line is this run's `started` event. The
// folder itself goes when nothing else is left in it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe {

/// What the store knows about a run's files, read before its rows are deleted.
struct RunFileFacts {
  std::string run_id;
  std::string recorded_dir;  ///< the `started` event's run_dir; "" for runs recorded before it existed
  nlohmann::json config;     ///< the run's config as stored
  std::vector<ArtifactRecord> artifacts;
  std::string store_dir;  ///< the store file's folder: old relative paths are tried against it too
};

/// The run's folder (canonical), or "" when none can be trusted; `why` says why not.
std::string locate_run_folder(const RunFileFacts& facts, std::string* why = nullptr);

/// Removes what provably belongs to the run (see the file comment) and fills result.files_*,
/// result.folder and result.folder_removed. Never removes anything outside the run's folder.
void delete_run_files(const RunFileFacts& facts, DeleteResult& result);

}  // namespace lathe
