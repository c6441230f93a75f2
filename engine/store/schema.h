// The store's schema as numbered migrations, applied in order at open and recorded in
// schema_version (one row per applied version). v1 is the first, smaller layout; v2 adds writer
// liveness (pid, heartbeat), metric directions, full summaries with the steps of min/max, the
// sample_blocks pyramid for downsampling, telemetry, and the indexes the queries need; v3 allows the
// `incomplete` run status (RunStatus::incomplete); v4 re-derives metric directions; v5 adds notes
// (runs.note) and tags (run_tags); v6 adds sweeps and sweep_members (sweep_store.h). A file
// written by a newer lathe is refused rather than guessed at.
#pragma once

#include "engine/store/sqlite_util.h"

namespace lathe::store_detail {

/// The version this code writes and reads.
constexpr int kSchemaVersion = 6;

/// Per-connection settings: WAL (persistent in the file), synchronous=NORMAL (a commit survives a
/// process crash; a power loss may drop the last commits but never corrupts), foreign keys off
/// (the store deletes dependents itself; the samples insert path stays lean), mmap reads.
void configure_connection(sql::Db& db);

/// The applied version: 0 for a new, empty file. DataError when the file holds tables but no
/// schema_version (not a lathe store) or is not an SQLite database at all.
int schema_version(sql::Db& db);

/// Brings the file to `target` (each step in its own write transaction, version re-read under the
/// write lock so two processes opening an old file at once migrate it once). DataError when the
/// file is newer than kSchemaVersion. `target` below kSchemaVersion exists for the migration tests.
void migrate(sql::Db& db, int target = kSchemaVersion);

}  // namespace lathe::store_detail
