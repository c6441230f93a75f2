// Finished runs with made-up metrics, written to a store with the real RunWriter: what a test of
// the run table, the charts or the parallel coordinates reads back.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/store/run_writer.h"

namespace lathe::test {

struct SyntheticMetric {
  std::string name;
  std::vector<double> values;  ///< value at step i+1
};

/// Writes a finished run with these metrics (step i+1, wall 10 ms per step) and returns its id.
inline std::string write_run(const std::string& db, const std::string& name, const nlohmann::json& config,
                             const std::vector<SyntheticMetric>& metrics) {
  RunWriter writer(db);
  RunInfo info;
  info.name = name;
  info.config = config;
  info.backend = "cpu";
  const std::string id = writer.begin_run(info);
  for (const auto& m : metrics)
    for (size_t i = 0; i < m.values.size(); ++i)
      writer.sample(m.name, static_cast<int64_t>(i + 1), 10.0 * (i + 1), m.values[i]);
  writer.finish(RunStatus::finished);
  return id;
}

}  // namespace lathe::test
