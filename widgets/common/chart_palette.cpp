// The chart palette (see chart_palette.h): matplotlib's "tab10", readable on white and in print.
#include "widgets/common/chart_palette.h"

namespace lathe::widgets {
namespace {

constexpr unsigned kTab10[kPaletteSize] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                           0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};

}  // namespace

QColor chart_color(size_t index) { return QColor::fromRgb(static_cast<QRgb>(kTab10[index % kPaletteSize])); }

std::string chart_color_hex(size_t index) { return chart_color(index).name().toStdString(); }

}  // namespace lathe::widgets
