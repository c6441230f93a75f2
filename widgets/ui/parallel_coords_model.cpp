// ParallelCoordsModel (see parallel_coords_model.h).
#include "widgets/ui/parallel_coords_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "widgets/ui/series_math.h"

namespace lathe::ui {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The number a whole text spells ("0.02", "1e-3", "64"), or nullopt ("adamw", "true", "1x").
std::optional<double> parse_number(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v))
    return std::nullopt;
  return v;
}

}  // namespace

void ParallelCoordsModel::setRuns(std::vector<std::string> ids, std::vector<std::string> names) {
  if (names.size() != ids.size())
    names = ids;
  m_ids = std::move(ids);
  m_names = std::move(names);
  m_axes.clear();
  updateSelection();
}

void ParallelCoordsModel::addAxis(const std::string& name, const std::vector<std::string>& values) {
  if (values.size() != m_ids.size())
    throw std::invalid_argument("parallel axis '" + name + "': " + std::to_string(values.size()) + " values for " +
                                std::to_string(m_ids.size()) + " runs");
  std::vector<double> numbers(values.size(), kNaN);
  bool numeric = true;
  for (size_t i = 0; i < values.size() && numeric; ++i) {
    if (values[i].empty())
      continue;
    const std::optional<double> v = parse_number(values[i]);
    numeric = v.has_value();
    if (numeric)
      numbers[i] = *v;
  }
  if (numeric) {
    addNumericAxis(name, numbers);
    return;
  }
  ParallelAxis a;
  a.name = name;
  a.categorical = true;
  const std::set<std::string> distinct(values.begin(), values.end());
  for (const std::string& c : distinct)
    if (!c.empty())
      a.categories.push_back(c);
  a.values.resize(values.size(), kNaN);
  for (size_t i = 0; i < values.size(); ++i)
    if (!values[i].empty())
      a.values[i] = static_cast<double>(std::lower_bound(a.categories.begin(), a.categories.end(), values[i]) -
                                        a.categories.begin());
  normalize(a);
  m_axes.push_back(std::move(a));
}

void ParallelCoordsModel::addNumericAxis(const std::string& name, const std::vector<double>& values) {
  if (values.size() != m_ids.size())
    throw std::invalid_argument("parallel axis '" + name + "': " + std::to_string(values.size()) + " values for " +
                                std::to_string(m_ids.size()) + " runs");
  ParallelAxis a;
  a.name = name;
  a.values = values;
  normalize(a);
  m_axes.push_back(std::move(a));
}

void ParallelCoordsModel::normalize(ParallelAxis& a) const {
  a.normalized.assign(a.values.size(), kNaN);
  if (a.categorical) {
    const size_t n = a.categories.size();
    for (size_t i = 0; i < a.values.size(); ++i)
      if (!std::isnan(a.values[i]))  // categories evenly spread; one category sits in the middle
        a.normalized[i] = n <= 1 ? 0.5 : a.values[i] / static_cast<double>(n - 1);
    return;
  }
  bool any = false;
  for (double v : a.values)
    if (!std::isnan(v)) {
      a.lo = any ? std::min(a.lo, v) : v;
      a.hi = any ? std::max(a.hi, v) : v;
      any = true;
    }
  const auto scale = [&a](double v) { return a.log ? std::log10(v) : v; };
  const double lo = scale(a.lo), hi = scale(a.hi);
  for (size_t i = 0; i < a.values.size(); ++i)
    if (!std::isnan(a.values[i]))
      a.normalized[i] = hi > lo ? (scale(a.values[i]) - lo) / (hi - lo) : 0.5;
}

void ParallelCoordsModel::removeAxis(size_t axis) {
  m_axes.erase(m_axes.begin() + static_cast<std::ptrdiff_t>(axis));
  updateSelection();
}

int ParallelCoordsModel::axisIndex(const std::string& name) const {
  for (size_t i = 0; i < m_axes.size(); ++i)
    if (m_axes[i].name == name)
      return static_cast<int>(i);
  return -1;
}

void ParallelCoordsModel::moveAxis(size_t from, size_t to) {
  if (from >= m_axes.size() || to >= m_axes.size())
    throw std::out_of_range("parallel axes: move " + std::to_string(from) + " to " + std::to_string(to) + " of " +
                            std::to_string(m_axes.size()));
  ParallelAxis a = std::move(m_axes[from]);
  m_axes.erase(m_axes.begin() + static_cast<std::ptrdiff_t>(from));
  m_axes.insert(m_axes.begin() + static_cast<std::ptrdiff_t>(to), std::move(a));
}

void ParallelCoordsModel::setLog(size_t axis, bool log) {
  ParallelAxis& a = m_axes.at(axis);
  if (log == a.log)
    return;
  if (log && a.categorical)
    throw std::invalid_argument("axis '" + a.name + "': a log scale needs numbers; its values are categories");
  if (log && a.lo <= 0)  // lo is the smallest value present
    throw std::invalid_argument("axis '" + a.name + "': a log scale needs every value > 0 (it has " +
                                plain_number(a.lo) + ")");
  // The brush keeps the same values: map its ends through the old scale and back.
  std::optional<std::pair<double, double>> values;
  if (a.brush)
    values = std::make_pair(valueAt(axis, a.brush->first), valueAt(axis, a.brush->second));
  a.log = log;
  normalize(a);
  if (values) {
    const auto to_t = [&a](double v) {
      const auto s = [&a](double x) { return a.log ? std::log10(x) : x; };
      return a.hi > a.lo ? (s(v) - s(a.lo)) / (s(a.hi) - s(a.lo)) : 0.5;
    };
    a.brush = std::make_pair(to_t(values->first), to_t(values->second));
  }
  updateSelection();
}

void ParallelCoordsModel::setBrush(size_t axis, double lo, double hi) {
  if (lo > hi)
    std::swap(lo, hi);
  m_axes.at(axis).brush = std::make_pair(lo, hi);
  updateSelection();
}

void ParallelCoordsModel::clearBrush(size_t axis) {
  m_axes.at(axis).brush.reset();
  updateSelection();
}

void ParallelCoordsModel::clearBrushes() {
  for (ParallelAxis& a : m_axes)
    a.brush.reset();
  updateSelection();
}

bool ParallelCoordsModel::anyBrush() const {
  return std::any_of(m_axes.begin(), m_axes.end(), [](const ParallelAxis& a) { return a.brush.has_value(); });
}

void ParallelCoordsModel::updateSelection() {
  m_selected.assign(m_ids.size(), 1);
  for (const ParallelAxis& a : m_axes) {
    if (!a.brush)
      continue;
    const double lo = a.brush->first, hi = a.brush->second;
    for (size_t i = 0; i < m_ids.size(); ++i) {
      const double t = a.normalized[i];
      if (!(t >= lo && t <= hi))  // NaN fails too
        m_selected[i] = 0;
    }
  }
  m_selectedCount = static_cast<size_t>(std::count(m_selected.begin(), m_selected.end(), 1));
}

std::vector<size_t> ParallelCoordsModel::selectedRuns() const {
  std::vector<size_t> out;
  out.reserve(m_selectedCount);
  for (size_t i = 0; i < m_selected.size(); ++i)
    if (m_selected[i])
      out.push_back(i);
  return out;
}

double ParallelCoordsModel::valueAt(size_t axis, double t) const {
  const ParallelAxis& a = m_axes.at(axis);
  if (a.categorical)
    return a.categories.size() <= 1 ? 0 : t * static_cast<double>(a.categories.size() - 1);
  if (a.log)
    return std::pow(10.0, std::log10(a.lo) + t * (std::log10(a.hi) - std::log10(a.lo)));
  return a.lo + t * (a.hi - a.lo);
}

std::string ParallelCoordsModel::label(size_t axis, double value) const {
  const ParallelAxis& a = m_axes.at(axis);
  if (a.categorical) {
    const long i = std::lround(value);
    return i >= 0 && static_cast<size_t>(i) < a.categories.size() ? a.categories[static_cast<size_t>(i)] : "";
  }
  return plain_number(value);
}

}  // namespace lathe::ui
