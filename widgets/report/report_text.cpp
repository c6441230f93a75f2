// Number, duration and escaping helpers of the report writers (see report_text.h).
#include "widgets/report/report_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace lathe::report {

namespace {

std::string with_thousands(double rounded) {
  char digits[32];
  std::snprintf(digits, sizeof(digits), "%.0f", std::fabs(rounded));
  const std::string d = digits;
  std::string out = rounded < 0 ? "-" : "";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0)
      out += ',';
    out += d[i];
  }
  return out;
}

bool ends_with(std::string_view text, std::string_view tail) {
  return text.size() >= tail.size() && text.substr(text.size() - tail.size()) == tail;
}

}  // namespace

std::string format_value(double value) {
  if (std::isnan(value))
    return "-";
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  char buf[48];
  const double mag = std::fabs(value);
  if (mag >= 1e15) {
    std::snprintf(buf, sizeof(buf), "%.4g", value);
    return buf;
  }
  if (mag >= 1e4)
    return with_thousands(std::round(value));
  std::snprintf(buf, sizeof(buf), "%.4g", value);
  return buf;
}

std::string format_headline(std::string_view metric, double value) {
  if (std::isnan(value))
    return "-";
  char buf[64];
  if (ends_with(metric, "accuracy") || ends_with(metric, "/util") || ends_with(metric, "/mfu") ||
      ends_with(metric, "_fraction")) {
    std::snprintf(buf, sizeof(buf), "%.2f%%", 100.0 * value);
    return buf;
  }
  if (ends_with(metric, "bytes")) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = value;
    int u = 0;
    while (std::fabs(v) >= 1024 && u < 4) {
      v /= 1024;
      ++u;
    }
    if (u == 0)
      return format_value(value) + " B";
    std::snprintf(buf, sizeof(buf), "%.2f %s", v, units[u]);
    return buf;
  }
  if (metric.rfind("cost/", 0) == 0 || ends_with(metric, "usd")) {
    // Two significant digits at least: $ per accuracy point of a cheap run is often below $0.0001.
    int decimals = std::fabs(value) >= 100 ? 2 : 4;
    if (value != 0 && std::fabs(value) < 0.01)
      decimals = std::max(4, 1 - static_cast<int>(std::floor(std::log10(std::fabs(value)))));
    std::snprintf(buf, sizeof(buf), "$%.*f", std::min(decimals, 12), value);
    return buf;
  }
  if (ends_with(metric, "_per_s"))
    return format_value(value) + " /s";
  return format_value(value);
}

std::string format_duration_s(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "-";
  const long t = std::lround(seconds);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof(buf), "%ld:%02ld", t / 60, t % 60);
  return buf;
}

std::string run_duration(const RunRecord& run) {
  if (!run.started_ms)
    return "-";
  const int64_t end = run.finished_ms ? *run.finished_ms : (run.heartbeat_ms ? *run.heartbeat_ms : *run.started_ms);
  return format_duration_s(static_cast<double>(end - *run.started_ms) / 1000.0);
}

std::string exact_number(double value) {
  if (std::isnan(value))
    return "NaN";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, res.ptr);
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos)
    return std::string(text);
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"')
      out += '"';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace lathe::report
