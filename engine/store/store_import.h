// Merging other stores into this one: the runs of a Slurm sweep's tasks, each written to its own
// store file in a shared folder (SQLite is not safe over NFS, so no task writes the main store).
// Idempotent: runs are matched by id, samples by (run, metric, step), events, artifacts and
// telemetry by their contents, so importing the same file again adds nothing, and importing a
// file that is still being written adds only what is new (the GUI imports a folder on a timer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

class Store;

struct ImportResult {
  int files = 0;             ///< store files read
  int runs_added = 0;        ///< runs new to this store
  int runs_updated = 0;      ///< runs already here whose status or times changed
  int64_t samples_added = 0;
  int64_t events_added = 0;
  std::vector<std::string> skipped;  ///< "FILE: why" for files that could not be read (still being created...)
};

/// Imports one store file (`path` a file) or every `*.db` file under a folder (recursively), all
/// but the destination itself. DataError when `path` does not exist; a file that is not a lathe
/// store is listed in `skipped` when it came from a folder, an error when named.
ImportResult import_stores(Store& dest, const std::string& path);

}  // namespace lathe
