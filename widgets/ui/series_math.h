// Pure numeric helpers behind the charts and the compare view: EMA smoothing, the Pareto front of
// a scatter and the ETA of a running job. No Qt, so tests check them against hand-computed values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lathe::ui {

/// Exponential moving average, TensorBoard style with debiasing: s_t = a*s_{t-1} + (1-a)*x_t,
/// reported as s_t / (1 - a^t). alpha in [0, 1); 0 returns the input. NaN inputs are skipped
/// (their output repeats the last smoothed value, or NaN before the first finite one).
class Ema {
 public:
  explicit Ema(double alpha = 0) : m_alpha(alpha) {}
  double push(double x);
  double alpha() const { return m_alpha; }

 private:
  double m_alpha;
  double m_state = 0;
  double m_weight = 0;  // 1 - alpha^t
};
std::vector<double> ema(const std::vector<double>& values, double alpha);

struct XY {
  double x = 0, y = 0;
};

/// Indices of the points on the Pareto front, sorted by x ascending. A point is on the front when
/// no other point is at least as good on both axes and strictly better on one. `maximize_x` /
/// `maximize_y` say which way is better. NaN points are never on the front.
std::vector<int> pareto_front(const std::vector<XY>& points, bool maximize_x, bool maximize_y);

/// Seconds left for a run at `done` of `total` steps after `elapsed_s` seconds, assuming the
/// average rate so far; nullopt when it cannot be told (no progress yet, unknown total).
std::optional<double> eta_seconds(int64_t done, int64_t total, double elapsed_s);

/// A number as tables and legends show it, never in scientific notation: 46,940 / 0.8125 / 0.00003
/// ("-" for NaN). `digits` significant digits below 10,000; whole numbers with thousands separators above.
std::string plain_number(double v, int digits = 4);

/// "42 s", "3 min 05 s", "1 h 02 min".
std::string format_duration(double seconds);

}  // namespace lathe::ui
