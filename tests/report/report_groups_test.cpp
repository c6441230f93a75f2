// A grouped comparison report: the HTML of a 3-seed x 4-ratio study names its 4 groups, shows
// each group's last test/accuracy as mean ± sample std (n=3) with the numbers computed here by
// hand from the stored series, says which std it is, and embeds one group chart per metric; the
// real `lathe-cli report --group` writes the same section; runs' tags and notes appear (escaped).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "engine/analysis/run_groups.h"
#include "report_test_util.h"
#include "tests/analysis/analysis_test_util.h"
#include "widgets/report/report.h"

namespace lathe {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// "mean ± std (n=3)" of the last stored test/accuracy of `ids`, by hand.
std::string expected_cell(const Store& store, const std::vector<std::string>& ids) {
  std::vector<double> v;
  for (const std::string& id : ids)
    v.push_back(store.series(id, "test/accuracy").back().value);
  double mean = 0;
  for (double x : v)
    mean += x;
  mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v)
    ss += (x - mean) * (x - mean);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.4g \u00b1 %.2g (n=%zu)", mean, std::sqrt(ss / static_cast<double>(v.size() - 1)),
                v.size());
  return buf;
}

TEST(ReportGroups, HtmlShowsGroupsWithMeanAndSampleStd) {
  test::ensure_qapp();
  test::TempDir dir;
  const std::string db = dir.file("lathe.db");
  const std::vector<std::string> ids = test::write_study(db);
  Store store = Store::open(db);
  const std::string path = dir.file("groups.html");
  const GroupBy by;
  report::write_report(store, ids, report::Format::html, path, &by);
  const std::string html = read_all(path);
  EXPECT_NE(html.find("<h2>Groups</h2>"), std::string::npos);
  EXPECT_NE(html.find("4 group(s) of 12 runs by config without seed, name"), std::string::npos);
  EXPECT_NE(html.find("ddof=1"), std::string::npos);
  for (size_t g = 0; g < 4; ++g) {
    const std::vector<std::string> members(ids.begin() + 3 * g, ids.begin() + 3 * g + 3);
    const std::string cell = expected_cell(store, members);
    EXPECT_NE(html.find(cell), std::string::npos) << "group " << g << " should show " << cell;
  }
  EXPECT_NE(html.find("prune.ratio=0.25"), std::string::npos);
  EXPECT_NE(html.find("<h2>Group charts</h2>"), std::string::npos);
  EXPECT_NE(html.find("alt=\"test/accuracy\""), std::string::npos);
  // Tags and notes of the runs are in the report.
  store.add_tags(ids[0], {"paper"});
  store.set_note(ids[0], "the <dense> reference");
  report::write_report(store, {ids[0], ids[1]}, report::Format::html, dir.file("notes.html"));
  const std::string notes = read_all(dir.file("notes.html"));
  EXPECT_NE(notes.find("[paper]: the &lt;dense&gt; reference"), std::string::npos);
  report::write_report(store, {ids[0]}, report::Format::html, dir.file("one.html"));
  EXPECT_NE(read_all(dir.file("one.html")).find("the &lt;dense&gt; reference"), std::string::npos);
  // Without groups the section is absent.
  report::write_report(store, ids, report::Format::html, dir.file("plain.html"));
  EXPECT_EQ(read_all(dir.file("plain.html")).find("<h2>Groups</h2>"), std::string::npos);
}

TEST(ReportGroups, CliReportGroupBy) {
  test::TempDir dir;
  const std::string db = dir.file("lathe.db");
  const std::vector<std::string> ids = test::write_study(db, {0.25, 0.5}, 2);
  const std::string out = dir.file("r.html");
  const test::CmdResult r =
      test::run_shell(std::string(LATHE_TEST_BINARY_DIR) + "/app/lathe-cli --db " + db + " report " + ids[0] + " " +
                      ids[1] + " " + ids[2] + " " + ids[3] + " --group-by prune.ratio -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string html = read_all(out);
  EXPECT_NE(html.find("2 group(s) of 4 runs by prune.ratio"), std::string::npos);
  EXPECT_NE(html.find("(n=2)"), std::string::npos);
}

}  // namespace
}  // namespace lathe
