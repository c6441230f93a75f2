// EMA, Pareto front and ETA (see series_math.h).
#include "widgets/ui/series_math.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace lathe::ui {

double Ema::push(double x) {
  if (!std::isfinite(x))
    return m_weight > 0 ? m_state / m_weight : std::nan("");
  m_state = m_alpha * m_state + (1 - m_alpha) * x;
  m_weight = m_alpha * m_weight + (1 - m_alpha);
  return m_state / m_weight;
}

std::vector<double> ema(const std::vector<double>& values, double alpha) {
  Ema e(alpha);
  std::vector<double> out;
  out.reserve(values.size());
  for (double v : values)
    out.push_back(e.push(v));
  return out;
}

std::vector<int> pareto_front(const std::vector<XY>& points, bool maximize_x, bool maximize_y) {
  const auto better_eq = [](double a, double b, bool maximize) { return maximize ? a >= b : a <= b; };
  const auto strictly = [](double a, double b, bool maximize) { return maximize ? a > b : a < b; };
  std::vector<int> front;
  for (size_t i = 0; i < points.size(); ++i) {
    const XY& p = points[i];
    if (!std::isfinite(p.x) || !std::isfinite(p.y))
      continue;
    bool dominated = false;
    for (size_t j = 0; j < points.size() && !dominated; ++j) {
      const XY& q = points[j];
      if (j == i || !std::isfinite(q.x) || !std::isfinite(q.y))
        continue;
      dominated = better_eq(q.x, p.x, maximize_x) && better_eq(q.y, p.y, maximize_y) &&
                  (strictly(q.x, p.x, maximize_x) || strictly(q.y, p.y, maximize_y));
    }
    if (!dominated)
      front.push_back(static_cast<int>(i));
  }
  std::sort(front.begin(), front.end(), [&](int a, int b) { return points[a].x < points[b].x; });
  return front;
}

std::optional<double> eta_seconds(int64_t done, int64_t total, double elapsed_s) {
  if (done <= 0 || total <= 0 || elapsed_s <= 0)
    return std::nullopt;
  if (done >= total)
    return 0.0;
  return elapsed_s * static_cast<double>(total - done) / static_cast<double>(done);
}

std::string plain_number(double v, int digits) {
  if (std::isnan(v))
    return "-";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  const double mag = std::fabs(v);
  char buf[64];
  if (mag >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.0f", std::fabs(std::round(v)));
    std::string d = buf, out = v < 0 ? "-" : "";
    for (size_t i = 0; i < d.size(); ++i) {
      if (i > 0 && (d.size() - i) % 3 == 0)
        out += ',';
      out += d[i];
    }
    return out;
  }
  if (mag == 0)
    return "0";
  // Enough decimals for `digits` significant digits, then trailing zeros dropped.
  const int decimals = std::clamp(digits - 1 - static_cast<int>(std::floor(std::log10(mag))), 0, 12);
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string out = buf;
  if (out.find('.') != std::string::npos) {
    while (out.back() == '0')
      out.pop_back();
    if (out.back() == '.')
      out.pop_back();
  }
  return out == "-0" ? "0" : out;
}

std::string format_duration(double seconds) {
  char buf[64];
  const long s = std::lround(std::max(0.0, seconds));
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%ld s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ld min %02ld s", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld h %02ld min", s / 3600, (s % 3600) / 60);
  return buf;
}

}  // namespace lathe::ui
