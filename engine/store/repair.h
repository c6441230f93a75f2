// Repair: re-imports a run's samples from its metrics.jsonl (the JSONL sink writes every sample
// line by line, so it holds what a locked store or a kill -9 kept out of the database). Samples go
// in with INSERT OR IGNORE through the writer's own inserter, so metric_summary, the sample_blocks
// pyramid and runs.summary_pack are updated for exactly the rows that were missing, and a second
// repair changes nothing. An `incomplete` run gets back the status it really ended with (named by
// its status event); an `interrupted` run whose file ends with the trainer's "finished" or
// "cancelled" event gets that status, and a `running` run whose writer is gone (not reaped yet,
// e.g. the store was locked) gets that status or `interrupted`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/store/store.h"

namespace lathe {

struct RepairReport {
  std::string run_id, metrics_file;
  int64_t samples_in_file = 0;  ///< sample lines read
  int64_t inserted = 0;         ///< of those, rows that were missing and are now in the store
  int64_t bad_lines = 0;        ///< lines that are not JSON objects (e.g. cut by a kill): skipped
  RunStatus status_before = RunStatus::queued, status_after = RunStatus::queued;
};

struct RepairOptions {
  std::string metrics_file;  ///< "" : the file the run's "started" event names
  int64_t wait_ms = 60'000;  ///< how long a locked store is waited for
};

/// Repairs `run_id` (an exact id). DataError when the run is still being written by a live
/// process, or when its metrics file is unknown or unreadable.
RepairReport repair_run(Store& store, const std::string& run_id, const RepairOptions& options = {});

/// The metrics.jsonl a run's events name ("" when none does).
std::string recorded_metrics_file(const Store& store, const std::string& run_id);

}  // namespace lathe
