// One chart palette (widgets/common): a live chart's series, a compare view's runs and a report's
// runs get the same colour for the same index, so a run keeps its colour from the app to its report.
#include <gtest/gtest.h>

#include "widgets/common/chart_palette.h"
#include "widgets/ui/live_chart.h"
#ifdef LATHE_HAVE_REPORT
#include "widgets/report/report_charts.h"
#endif

namespace lathe::ui {

TEST(GuiPalette, LiveChartAndReportsUseTheOnePalette) {
  EXPECT_EQ(widgets::chart_color(0), QColor(31, 119, 180));
  EXPECT_EQ(widgets::chart_color(9), QColor(23, 190, 207));
  EXPECT_EQ(widgets::chart_color(10), widgets::chart_color(0));  // wraps after ten
  EXPECT_EQ(widgets::chart_color_hex(1), "#ff7f0e");

  // Each series is a raw (translucent) graph and its smoothed line in the full colour.
  LiveChart chart("t", {"a", "b", "c", "d", "e", "f", "g"});
  ASSERT_EQ(chart.graphCount(), 14);
  for (int i = 0; i < 7; ++i)
    EXPECT_EQ(chart.graph(2 * i + 1)->pen().color(), widgets::chart_color(static_cast<size_t>(i))) << i;
#ifdef LATHE_HAVE_REPORT
  for (size_t i = 0; i < 12; ++i)
    EXPECT_EQ(report::run_color(i), widgets::chart_color_hex(i)) << i;
#endif
}

}  // namespace lathe::ui
