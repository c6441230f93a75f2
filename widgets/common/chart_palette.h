// The one colour palette of every chart (live, compare, reports): run or series i gets colour
// i mod 10, so a run keeps its colour between the app's Compare tab and its exported report.
#pragma once

#include <QColor>
#include <cstddef>
#include <string>

namespace lathe::widgets {

/// Number of distinct colours before the palette repeats.
constexpr size_t kPaletteSize = 10;

/// The colour of series `index` (wraps around after kPaletteSize).
QColor chart_color(size_t index);

/// The same colour as "#rrggbb", for HTML.
std::string chart_color_hex(size_t index);

}  // namespace lathe::widgets
