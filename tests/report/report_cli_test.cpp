// The real `lathe-cli report`, with no display: HTML, PDF and CSV of runs given by id prefix,
// the format taken from --format or the file's extension, and exit code 2 with a clear message
// for an unknown run, a bad format or an unwritable path.
#include "report_test_util.h"

namespace lathe::report {
namespace {

using test::read_file;

class ReportCli : public ::testing::Test {
 protected:
  void SetUp() override { m_runs = test::seed_runs(db(), m_dir.file("model.safetensors")); }
  std::string db() const { return m_dir.file("lathe.db"); }
  /// lathe-cli report ARGS --db DB, with no display and no Qt platform chosen.
  test::CmdResult report(const std::string& args) const {
    return test::run_shell("env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM " +
                           std::string(LATHE_TEST_BINARY_DIR) + "/app/lathe-cli report " + args + " --db '" + db() +
                           "'");
  }
  test::TempDir m_dir;
  test::SeededRuns m_runs;
};

TEST_F(ReportCli, WritesAllThreeFormatsWithoutADisplay) {
  const std::string html = m_dir.file("r.html"), pdf = m_dir.file("r.pdf"), csv = m_dir.file("r.csv");
  // Runs by unique id prefix ("...aaaa" and "...bbbb").
  test::CmdResult r = report("20260101-120000-aaaa 20260101-130000-bbbb --format html -o '" + html + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote the html report of 2 run(s)"), std::string::npos) << r.out;
  const std::string h = read_file(html);
  EXPECT_NE(h.find("Comparison of 2 runs"), std::string::npos);
  EXPECT_NE(h.find(">0.875<"), std::string::npos);
  EXPECT_EQ(test::count_of(h, "data:image/png;base64,"), 3u);

  r = report(m_runs.a + " --format pdf -o '" + pdf + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string p = read_file(pdf);
  EXPECT_EQ(p.rfind("%PDF-", 0), 0u);
  EXPECT_GT(p.size(), 20'000u);

  r = report("cnn-fashion-pruned -o '" + csv + "'");  // by name; the format from the extension
  ASSERT_EQ(r.code, 0) << r.out;
  const auto rows = test::parse_csv(read_file(csv));
  size_t of_b = 0;
  for (const auto& [key, v] : m_runs.samples)
    of_b += std::get<0>(key) == m_runs.b;
  ASSERT_EQ(rows.size(), of_b + 1);
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 5u);
    const auto it = m_runs.samples.find({rows[i][0], rows[i][1], std::stoll(rows[i][2])});
    ASSERT_NE(it, m_runs.samples.end());
    EXPECT_EQ(std::strtod(rows[i][4].c_str(), nullptr), it->second.second);
  }
}

TEST_F(ReportCli, ClearErrorsWithExitCode2) {
  test::CmdResult r = report("no-such-run --format html -o '" + m_dir.file("x.html") + "'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no run matches \"no-such-run\""), std::string::npos) << r.out;

  r = report(m_runs.a + " --format docx -o '" + m_dir.file("x.docx") + "'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--format"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("html, pdf, csv"), std::string::npos) << r.out;

  r = report(m_runs.a + " -o '" + m_dir.file("x.txt") + "'");  // no --format, no known extension
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--format"), std::string::npos) << r.out;

  r = report(m_runs.a + " --format pdf -o /nonexistent-folder/r.pdf");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/nonexistent-folder/r.pdf"), std::string::npos) << r.out;

  r = report(m_runs.a + " --format csv");  // -o is required
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--output"), std::string::npos) << r.out;
  EXPECT_FALSE(test::fs::exists(m_dir.file("x.html")));
}

}  // namespace
}  // namespace lathe::report
