// Sweeps and validator messages as data: expanding one or two knobs into the --set lists of the
// runs to queue, and splitting a ConfigError message into (JSON path, message) lines that the
// form marks at its fields. No Qt.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lathe::ui {

struct SweepAxis {
  std::string knob;                 ///< a schema path, e.g. "prune.ratio"
  std::vector<std::string> values;  ///< as typed, e.g. {"0.3", "0.5"}
};

/// One `--set` list per run: the cartesian product of the axes in order (first axis outermost).
/// Axes with an empty knob are ignored. ConfigError for an axis with a knob and no values, or a
/// knob that is not a schema field (naming the field).
std::vector<std::vector<std::string>> expand_sweep(const std::vector<SweepAxis>& axes);

/// "0.3, 0.5 ,0.7" -> {"0.3", "0.5", "0.7"} (commas or whitespace separate).
std::vector<std::string> split_values(const std::string& text);

struct FieldMessage {
  std::string path;     ///< the JSON path the line starts with ("" when it names none)
  std::string message;  ///< the whole line
};

/// Splits a validate_config() error text (one problem per line, each "path: ...") into lines.
std::vector<FieldMessage> split_config_errors(const std::string& text);

}  // namespace lathe::ui
