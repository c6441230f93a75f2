// "Best" follows each metric's declared direction (default_direction): the HTML and PDF report of
// a 3-run comparison bold the smallest bytes, latency and cost and the highest accuracy, and
// `lathe-cli list` gives the same directions (--json) and order (--sort best:). The metric summary
// gives each metric's unit (default_unit) beside its name, in one run's report and in a comparison.
#include <nlohmann/json.hpp>
#include <regex>

#include "report_test_util.h"
#include "widgets/report/report.h"
#include "widgets/report/report_text.h"

namespace lathe::report {
namespace {

using test::read_file;

struct Seeded {
  std::string alpha, beta, gamma;
};

/// alpha: the highest accuracy, the worst everything else; beta: the smallest model; gamma: the
/// lowest latency and cost. Every value is a distinct string in the report.
Seeded seed(const std::string& db) {
  Seeded s;
  const auto run = [&](const char* name, double bytes, double b1_ms, double b256_ms, double usd, double acc,
                       double loss) {
    RunWriter w(db);
    RunInfo info;
    info.name = name;
    info.config = {{"name", name}, {"train", {{"epochs", 1}}}};
    info.backend = "cpu";
    const std::string id = w.begin_run(info);
    w.sample("model/bytes", 10, 1, bytes);
    w.sample("latency/dense/b1_ms", 10, 2, b1_ms);
    w.sample("latency/dense/b256_ms", 10, 3, b256_ms);
    w.sample("cost/usd", 10, 4, usd);
    w.sample("test/accuracy", 10, 5, acc);
    w.sample("test/loss", 10, 6, loss);
    w.finish(RunStatus::finished);
    return id;
  };
  s.alpha = run("alpha", 333333, 9.012, 93.21, 0.0789, 0.8333, 0.4111);
  s.beta = run("beta", 111111, 5.678, 56.43, 0.0456, 0.8111, 0.4333);
  s.gamma = run("gamma", 222222, 1.234, 12.76, 0.0123, 0.8222, 0.4222);
  return s;
}

/// The winner's value of each glance metric, and the losers' values (never bold).
struct Expect {
  std::string metric, winner;
  std::vector<std::string> losers;
};
const std::vector<Expect> kExpect = {
    {"model/bytes", "111,111", {"222,222", "333,333"}},     {"latency/dense/b1_ms", "1.234", {"5.678", "9.012"}},
    {"latency/dense/b256_ms", "12.76", {"56.43", "93.21"}}, {"cost/usd", "0.0123", {"0.0456", "0.0789"}},
    {"test/accuracy", "0.8333", {"0.8111", "0.8222"}},      {"test/loss", "0.4111", {"0.4222", "0.4333"}},
};

class ReportDirection : public ::testing::Test {
 protected:
  void SetUp() override {
    test::ensure_qapp();
    m_runs = seed(db());
  }
  std::string db() const { return m_dir.file("lathe.db"); }
  std::vector<std::string> ids() const { return {m_runs.alpha, m_runs.beta, m_runs.gamma}; }
  test::TempDir m_dir;
  Seeded m_runs;
};

/// The cells of the first table row after `from` whose first cell holds `metric`.
std::vector<std::string> row_cells(const std::string& html, size_t from, const std::string& metric) {
  const size_t at = html.find("<span class=\"key\">" + metric + "</span>", from);
  if (at == std::string::npos)
    return {};
  const size_t end = html.find("</tr>", at);
  const std::string row = html.substr(at, end - at);
  std::vector<std::string> cells;
  const std::regex td("<td[^>]*>(.*?)</td>");
  for (auto it = std::sregex_iterator(row.begin(), row.end(), td); it != std::sregex_iterator(); ++it)
    cells.push_back((*it)[1]);
  return cells;
}

TEST_F(ReportDirection, HtmlGlanceBoldsTheBestByDirection) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("cmp.html");
  write_report(store, ids(), Format::html, path);
  const std::string html = read_file(path);
  const size_t glance = html.find("Results at a glance");
  ASSERT_NE(glance, std::string::npos);
  for (const Expect& e : kExpect) {
    const std::vector<std::string> cells = row_cells(html, glance, e.metric);
    ASSERT_EQ(cells.size(), 3u) << e.metric << " is not a row of the glance table";
    int bold = 0;
    for (const std::string& c : cells) {
      if (c.find("<b>") != std::string::npos) {
        ++bold;
        EXPECT_EQ(c, "<b>" + e.winner + "</b>") << e.metric;
      }
    }
    EXPECT_EQ(bold, 1) << e.metric;
    for (const std::string& loser : e.losers)
      EXPECT_EQ(html.find("<b>" + loser + "</b>"), std::string::npos) << e.metric << " " << loser << " is bold";
  }
  EXPECT_NE(html.find("Lower is better for losses, bytes"), std::string::npos);
  EXPECT_EQ(html.find("lowest loss or cost"), std::string::npos);
}

TEST_F(ReportDirection, GlanceHasDollarsPerRunAndPerAccuracyPoint) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("cost.html");
  write_report(store, ids(), Format::html, path);
  const std::string html = read_file(path);
  const size_t glance = html.find("Results at a glance");
  ASSERT_NE(glance, std::string::npos);
  // $ per run: each run's final cost/usd; gamma is the cheapest.
  EXPECT_EQ(row_cells(html, glance, "cost/usd_per_run"),
            (std::vector<std::string>{"0.0789", "0.0456", "<b>0.0123</b>"}));
  // $ per accuracy point: cost / (accuracy x 100), lower is better (though its name says accuracy).
  const std::vector<std::string> per_point = row_cells(html, glance, "cost/usd_per_accuracy_point");
  EXPECT_EQ(per_point, (std::vector<std::string>{format_value(0.0789 / 83.33), format_value(0.0456 / 81.11),
                                                 "<b>" + format_value(0.0123 / 82.22) + "</b>"}));
  // The single-run report's cards show it too.
  const std::string one = m_dir.file("one.html");
  write_report(store, {m_runs.beta}, Format::html, one);
  EXPECT_NE(read_file(one).find(format_headline("cost/usd_per_accuracy_point", 0.0456 / 81.11)), std::string::npos);
}

TEST_F(ReportDirection, MetricSummaryGivesEachMetricsUnit) {
  Store store = Store::open(db());
  const std::pair<const char*, const char*> units[] = {{"model/bytes", "bytes"}, {"latency/dense/b1_ms", "ms"},
                                                       {"cost/usd", "USD"},      {"test/accuracy", "fraction"},
                                                       {"test/loss", ""}};
  for (const bool comparison : {false, true}) {
    const std::string path = m_dir.file(comparison ? "units-cmp.html" : "units-one.html");
    write_report(store, comparison ? ids() : std::vector<std::string>{m_runs.beta}, Format::html, path);
    const std::string html = read_file(path);
    const size_t summary = html.find("Metric summary");
    ASSERT_NE(summary, std::string::npos);
    EXPECT_NE(html.find("<th align=\"left\">Unit</th>", summary), std::string::npos) << "no Unit column";
    const std::string span = comparison ? " rowspan=\"3\"" : "";
    for (const auto& [metric, unit] : units)
      EXPECT_NE(html.find("<td class=\"key\"" + span + ">" + metric + "</td><td class=\"muted\"" + span + ">" + unit +
                              "</td>",
                          summary),
                std::string::npos)
          << metric << " lacks its unit '" << unit << "'" << (comparison ? " in the comparison" : "");
  }
}

TEST_F(ReportDirection, PdfBoldsTheBestByDirection) {
  if (test::run_shell("command -v pdftohtml").code != 0)
    GTEST_SKIP() << "pdftohtml (poppler-utils, in scripts/install-deps.sh) is not installed: PDF fonts not checked";
  Store store = Store::open(db());
  const std::string path = m_dir.file("cmp.pdf");
  write_report(store, ids(), Format::pdf, path);
  // pdftohtml -xml writes every text run with its font; a bold font's text comes as <b>...</b>.
  const test::CmdResult r = test::run_shell("pdftohtml -xml -i -stdout -q '" + path + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_NE(r.out.find("Results at a glance"), std::string::npos) << r.out.substr(0, 2000);
  for (const Expect& e : kExpect) {
    EXPECT_NE(r.out.find("<b>" + e.winner + "</b>"), std::string::npos) << e.metric << ": " << e.winner << " not bold";
    for (const std::string& loser : e.losers) {
      EXPECT_NE(r.out.find(">" + loser + "<"), std::string::npos) << e.metric << ": " << loser << " missing";
      EXPECT_EQ(r.out.find("<b>" + loser + "</b>"), std::string::npos) << e.metric << ": " << loser << " is bold";
    }
  }
}

TEST_F(ReportDirection, CliListUsesTheSameDirections) {
  const std::string cli = std::string(LATHE_TEST_BINARY_DIR) + "/app/lathe-cli";
  const test::CmdResult list = test::run_shell(cli + " list --json --db '" + db() + "'");
  ASSERT_EQ(list.code, 0) << list.out;
  const nlohmann::json j = nlohmann::json::parse(list.out);
  ASSERT_EQ(j.at("runs").size(), 3u);
  for (const nlohmann::json& run : j.at("runs")) {
    const nlohmann::json& m = run.at("metrics");
    EXPECT_EQ(m.at("cost/usd").at("direction"), "min");
    EXPECT_EQ(m.at("model/bytes").at("direction"), "min");
    EXPECT_EQ(m.at("test/accuracy").at("direction"), "max");
    EXPECT_EQ(m.at("test/loss").at("direction"), "min");
  }
  // best:cost/usd lists the cheapest run first; best:model/bytes the smallest.
  for (const auto& [metric, first] :
       std::vector<std::pair<std::string, std::string>>{{"cost/usd", m_runs.gamma}, {"model/bytes", m_runs.beta}}) {
    const test::CmdResult sorted = test::run_shell(cli + " list --json --sort best:" + metric + " --db '" + db() + "'");
    ASSERT_EQ(sorted.code, 0) << sorted.out;
    EXPECT_EQ(nlohmann::json::parse(sorted.out).at("runs").at(0).at("id"), first) << metric;
  }
}

}  // namespace
}  // namespace lathe::report
