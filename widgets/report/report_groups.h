// The groups part of a comparison report (lathe-cli report --group / --group-by): the runs folded
// into groups by their config (engine/analysis/run_groups.h), a table of every headline metric as
// mean ± sample std (n) per group, and per charted metric one chart with each group's mean line
// and its std band (standalone HTML).
#pragma once

#include <string>
#include <vector>

#include "engine/analysis/run_groups.h"
#include "widgets/report/report_data.h"
#include "widgets/report/report_html.h"

namespace lathe::report {

/// Groups data.runs by `by` (from the params and summaries already read) into data.groups.
void add_groups(ReportData& data, const GroupBy& by);

/// The "Groups" section: members of each group and the metric table. Nothing when there are no groups.
void write_groups(std::string& out, const ReportData& data);

/// One chart per charted metric: each group's mean line with a mean ± std band, at the steps of the
/// members' chart points. Needs a QApplication.
std::vector<ChartImage> render_group_charts(const ReportData& data, HtmlFlavor flavor);

}  // namespace lathe::report
