// Internal to engine/store: SQL fragments and row readers shared by store.cpp, store_series.cpp
// and run_writer.cpp, so a run row or a status event is written and read one way only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/store/aggregate.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store_types.h"

namespace lathe::store_detail {

/// Columns of runs read into a RunRecord (rid first), for "SELECT <kRunColumns> FROM runs r".
extern const char* const kRunColumns;
/// Reads kRunColumns starting at column 0 (rid -> *rid when given).
RunRecord read_run(const sql::Stmt& s, int64_t* rid = nullptr);

void insert_event(sql::Db& db, int64_t rid, const std::string& kind, const nlohmann::json& fields, int64_t at_ms);

/// Why a `running` run's writer is presumed dead ("" when it is alive). See Store::reap_stale_runs.
std::string stale_reason(const RunRecord& r, int64_t now_ms, int64_t stale_after_ms);

MetricSummary to_summary(std::string name, Direction d, const Agg& a);

/// Reads the note and tags of the runs `rids` into `records` (same order; store_notes.cpp).
void fill_notes(sql::Db& db, const std::vector<int64_t>& rids, const std::vector<RunRecord*>& records);

}  // namespace lathe::store_detail
