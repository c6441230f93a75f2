// Where a run's metrics and events go. The trainer writes to a MetricsSink. JsonlSink appends to
// runs/<id>/metrics.jsonl (one JSON object a line, written whole per line, so a killed run keeps
// every line written before it died): it is the recovery source of the store (lathe-cli repair).
// A failed write (full disk, file size limit) is reported once (stderr and the failure handler,
// which the trainer turns into a "metrics_file_failed" store event), the partial line is cut off
// and the file is not written again: the run goes on, since the store holds the samples.
// FanoutSink feeds several sinks at once.
#pragma once

#include <cstdint>
#include <functional>
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
  /// Opens `path` for appending. DataError when it cannot.
  explicit JsonlSink(const std::string& path);
  ~JsonlSink() override;
  JsonlSink(const JsonlSink&) = delete;
  JsonlSink& operator=(const JsonlSink&) = delete;
  void sample(const std::string& metric, int64_t step, double wall_ms, double value) override;
  void event(const std::string& kind, const nlohmann::json& fields) override;
  void flush() override {}  // every line is written out whole as it comes

  /// Called once, without the sink's lock, with "writing PATH: reason" when a write fails.
  void on_failure(std::function<void(const std::string& message)> handler) { m_on_failure = std::move(handler); }
  /// False once a write failed: the file ends with the last whole line written before.
  bool ok() const;
  const std::string& path() const { return m_path; }

 private:
  void write(const nlohmann::json& line);
  mutable std::mutex m_mutex;
  int m_fd = -1;
  int64_t m_good_bytes = 0;  // the file's size after the last whole line
  bool m_failed = false;
  std::string m_path;
  std::function<void(const std::string&)> m_on_failure;
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
