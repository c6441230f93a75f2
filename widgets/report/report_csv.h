// The CSV report: every sample of every metric of every run, never downsampled.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "engine/store/store.h"

namespace lathe::report {

/// Header `run_id,metric,step,wall_ms,value`, then one row per sample (runs in the given order,
/// metrics by name, steps ascending). Numbers in the shortest form that reads back exactly, NaN as
/// "NaN"; fields quoted per RFC 4180; lines end with CRLF. Returns the number of samples written.
int64_t write_samples_csv(const Store& store, const std::vector<std::string>& run_ids, std::ostream& out);

}  // namespace lathe::report
