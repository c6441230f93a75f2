// A MetricsSink for tests that keeps every sample (per metric, in order) and the kinds of the events
// logged, so a test can check what a stage or the pipeline reported.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/run/metrics_sink.h"

namespace lathe::test {

struct RecordingSink final : MetricsSink {
  std::map<std::string, std::vector<std::pair<int64_t, double>>> samples;
  std::vector<std::string> events;
  void sample(const std::string& metric, int64_t step, double, double value) override {
    samples[metric].push_back({step, value});
  }
  void event(const std::string& kind, const nlohmann::json&) override { events.push_back(kind); }
  /// The last value logged for `metric`; throws if it was never logged.
  double last(const std::string& metric) const {
    auto it = samples.find(metric);
    if (it == samples.end() || it->second.empty())
      throw std::runtime_error("metric " + metric + " was not logged");
    return it->second.back().second;
  }
};

}  // namespace lathe::test
