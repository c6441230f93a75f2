// ParallelCoordsModel: the data behind the parallel coordinates panel (issue 17 item 3), apart
// from any drawing so it is tested without a display. One axis per chosen knob (a flattened
// config value: numeric when every run's value parses as a number, else categorical, categories
// sorted) or metric summary; each run's value on each axis normalised to [0, 1] (linear or log
// scale, missing values NaN); axes reorder; a brush per axis (a [lo, hi] band in normalised units)
// and the runs that pass every brush. Plain C++: no Qt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lathe::ui {

struct ParallelAxis {
  std::string name;
  bool categorical = false;
  bool log = false;
  std::vector<std::string> categories;             ///< categorical: sorted; value = index
  std::vector<double> values;                      ///< per run: the number or category index; NaN = missing
  std::vector<double> normalized;                  ///< per run, in [0, 1]; NaN = missing
  double lo = 0, hi = 0;                           ///< numeric: the smallest and largest value present
  std::optional<std::pair<double, double>> brush;  ///< normalised [lo, hi]
};

class ParallelCoordsModel {
 public:
  /// Starts over with these runs (ids, and the names shown in tooltips) and no axes.
  void setRuns(std::vector<std::string> ids, std::vector<std::string> names);
  size_t runCount() const { return m_ids.size(); }
  const std::string& runId(size_t run) const { return m_ids.at(run); }
  const std::string& runName(size_t run) const { return m_names.at(run); }

  /// An axis of text values per run ("" = missing): numeric when every value present parses as a
  /// number, else categorical. Throws std::invalid_argument when the size is not runCount().
  void addAxis(const std::string& name, const std::vector<std::string>& values);
  /// An axis of numbers per run (NaN = missing).
  void addNumericAxis(const std::string& name, const std::vector<double>& values);
  void removeAxis(size_t axis);
  size_t axisCount() const { return m_axes.size(); }
  const ParallelAxis& axis(size_t i) const { return m_axes.at(i); }
  /// The index of the axis named so, or -1.
  int axisIndex(const std::string& name) const;
  /// Moves an axis to position `to` (the others keep their order); brushes move with it.
  void moveAxis(size_t from, size_t to);
  /// Log scale on a numeric axis. Throws std::invalid_argument naming the axis when it is
  /// categorical or a value is <= 0 (a log scale cannot place it).
  void setLog(size_t axis, bool log);

  /// Keeps the runs whose value on `axis` lies in normalised [lo, hi] (either order); runs missing
  /// on that axis are not kept.
  void setBrush(size_t axis, double lo, double hi);
  void clearBrush(size_t axis);
  void clearBrushes();
  bool anyBrush() const;
  /// Per run: 1 when it passes every brush (all runs when there is none).
  const std::vector<uint8_t>& selected() const { return m_selected; }
  std::vector<size_t> selectedRuns() const;
  size_t selectedCount() const { return m_selectedCount; }

  /// The value on an axis at normalised height t (numeric; the inverse of the scale).
  double valueAt(size_t axis, double t) const;
  /// A value as the axis labels it (category name, or a short number).
  std::string label(size_t axis, double value) const;

 private:
  void normalize(ParallelAxis& a) const;
  void updateSelection();
  std::vector<std::string> m_ids, m_names;
  std::vector<ParallelAxis> m_axes;
  std::vector<uint8_t> m_selected;
  size_t m_selectedCount = 0;
};

}  // namespace lathe::ui
