// Where a run's metrics and events go. The trainer writes to a MetricsSink; until the SQLite store
// lands, JsonlSink appends to runs/<id>/metrics.jsonl (one JSON object a line, flushed per line, so
// a killed run keeps every line written before it died). FanoutSink feeds several sinks at once.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lathe {

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  /// A scalar sample of `metric` at optimizer step `step`, `wall_ms` after the run started.
  virtual void sample(const std::string& metric, int64_t step, double wall_ms, double value) = 0;
  /// A state change, warning or note: {"event": kind, ...fields}.
  virtual void event(const std::string& kind, const nlohmann::json& fields) = 0;
  virtual void flush() {}
};

class JsonlSink final : public MetricsSink {
 public:
  explicit JsonlSink(const std::string& path);
  void sample(const std::string& metric, int64_t step, double wall_ms, double value) override;
  void event(const std::string& kind, const nlohmann::json& fields) override;
  void flush() override;

 private:
  void write(const nlohmann::json& line);
  std::mutex m_mutex;
  std::ofstream m_out;
  std::string m_path;
};

class FanoutSink final : public MetricsSink {
 public:
  void add(MetricsSink* sink) { m_sinks.push_back(sink); }
  void sample(const std::string& metric, int64_t step, double wall_ms, double value) override {
    for (MetricsSink* s : m_sinks)
      s->sample(metric, step, wall_ms, value);
  }
  void event(const std::string& kind, const nlohmann::json& fields) override {
    for (MetricsSink* s : m_sinks)
      s->event(kind, fields);
  }
  void flush() override {
    for (MetricsSink* s : m_sinks)
      s->flush();
  }

 private:
  std::vector<MetricsSink*> m_sinks;
};

}  // namespace lathe
