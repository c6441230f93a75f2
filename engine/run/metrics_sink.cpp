// JSON-lines metrics file: one object per line, each line written out whole (one checked write).
#include "engine/run/metrics_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>

#include "engine/core/error.h"
#include "engine/core/file_write.h"

namespace lathe {

JsonlSink::JsonlSink(const std::string& path) : m_path(path) {
  m_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (m_fd < 0)
    throw DataError(write_error_message(path, errno, "cannot open metrics file") + " for writing");
  struct stat st {};
  if (::fstat(m_fd, &st) == 0)
    m_good_bytes = st.st_size;
}

JsonlSink::~JsonlSink() {
  if (m_fd >= 0)
    ::close(m_fd);
}

bool JsonlSink::ok() const {
  std::lock_guard lock(m_mutex);
  return !m_failed;
}

void JsonlSink::write(const nlohmann::json& line) {
  std::string message;
  {
    std::lock_guard lock(m_mutex);
    if (m_failed)
      return;
    const std::string text = line.dump() + '\n';
    try {
      write_all(m_fd, text, m_path);
      m_good_bytes += static_cast<int64_t>(text.size());
      return;
    } catch (const Error& e) {
      m_failed = true;
      message = e.what();
      // Cut the partial line off so the file stays whole lines (a reader, or repair, parses it all).
      if (::ftruncate(m_fd, m_good_bytes) != 0) {
        // Nothing more to do: the partial last line is skipped by readers.
      }
    }
  }
  std::fprintf(stderr, "lathe: warning: %s; metrics.jsonl stops here (the store still records every sample)\n",
               message.c_str());
  if (m_on_failure)
    m_on_failure(message);
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

}  // namespace lathe
