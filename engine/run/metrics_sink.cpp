// JSON-lines metrics file: one object per line, written whole and flushed.
#include "engine/run/metrics_sink.h"

#include <cmath>

#include "engine/core/error.h"

namespace lathe {

JsonlSink::JsonlSink(const std::string& path) : m_out(path, std::ios::app), m_path(path) {
  if (!m_out)
    throw DataError("cannot open metrics file " + path + " for writing");
}

void JsonlSink::write(const nlohmann::json& line) {
  std::lock_guard lock(m_mutex);
  m_out << line.dump() << '\n';
  m_out.flush();
}

void JsonlSink::sample(const std::string& metric, int64_t step, double wall_ms, double value) {
  nlohmann::json j{{"metric", metric}, {"step", step}, {"wall_ms", std::round(wall_ms * 1000) / 1000}};
  if (std::isfinite(value)) {
    j["value"] = value;
  } else {
    j["value"] = nullptr;  // JSON has no inf/nan
    j["nonfinite"] = std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  }
  write(j);
}

void JsonlSink::event(const std::string& kind, const nlohmann::json& fields) {
  nlohmann::json j = fields;
  j["event"] = kind;
  write(j);
}

void JsonlSink::flush() {
  std::lock_guard lock(m_mutex);
  m_out.flush();
}

}  // namespace lathe
