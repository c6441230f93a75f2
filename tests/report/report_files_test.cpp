// write_report in every format from a store filled with known values: the CSV parsed back holds
// every sample exactly; the HTML holds the runs' numbers as the tables format them, embedded PNG
// charts and nothing external; the PDF is a real multi-page PDF whose text (pdftotext, when
// installed) holds the same numbers; bad input is rejected with an error that says what is wrong.
#include <QImage>
#include <cctype>
#include <cstdlib>
#include <set>

#include "engine/core/error.h"
#include "report_test_util.h"
#include "widgets/report/report.h"

namespace lathe::report {
namespace {

using test::count_of;
using test::read_file;

class ReportFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    test::ensure_qapp();
    m_runs = test::seed_runs(db(), m_dir.file("model.safetensors"));
  }
  std::string db() const { return m_dir.file("lathe.db"); }
  test::TempDir m_dir;
  test::SeededRuns m_runs;
};

TEST_F(ReportFiles, CsvHoldsEverySampleExactly) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("all.csv");
  write_report(store, {m_runs.a, m_runs.b, m_runs.failed}, Format::csv, path);
  const std::string text = read_file(path);
  EXPECT_EQ(text.substr(0, 34), "run_id,metric,step,wall_ms,value\r\n");
  const auto rows = test::parse_csv(text);
  ASSERT_GE(rows.size(), 1u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"run_id", "metric", "step", "wall_ms", "value"}));
  ASSERT_EQ(rows.size() - 1, m_runs.samples.size());
  std::set<test::SampleKey> seen;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& r = rows[i];
    ASSERT_EQ(r.size(), 5u) << "row " << i;
    const test::SampleKey key{r[0], r[1], std::stoll(r[2])};
    auto it = m_runs.samples.find(key);
    ASSERT_NE(it, m_runs.samples.end()) << r[0] << " " << r[1] << " " << r[2];
    EXPECT_TRUE(seen.insert(key).second) << "duplicate row " << i;
    EXPECT_EQ(std::strtod(r[3].c_str(), nullptr), it->second.first) << "wall_ms of row " << i << ": " << r[3];
    if (std::isnan(it->second.second))
      EXPECT_EQ(r[4], "NaN");
    else
      EXPECT_EQ(std::strtod(r[4].c_str(), nullptr), it->second.second) << "value of row " << i << ": " << r[4];
  }
  // The metric with a comma and quotes survives RFC 4180 quoting.
  EXPECT_NE(text.find(",\"weird,metric \"\"q\"\"\",1,"), std::string::npos);
  // Runs in the order given.
  EXPECT_EQ(rows[1][0], m_runs.a);
  EXPECT_EQ(rows.back()[0], m_runs.failed);
}

/// Every `src=` and `href=` of the document is a data: URI; no stylesheet links, url() or scripts.
/// (A plain scan: std::regex overflows its stack on megabyte-long attribute values.)
void expect_self_contained(const std::string& html) {
  std::string lower = html;
  for (char& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string attr : {"src=", "href="})
    for (size_t at = lower.find(attr); at != std::string::npos; at = lower.find(attr, at + 1)) {
      size_t v = at + attr.size();
      if (v < lower.size() && (lower[v] == '"' || lower[v] == '\''))
        ++v;
      EXPECT_EQ(lower.compare(v, 5, "data:"), 0) << "external reference: " << html.substr(at, 80);
    }
  EXPECT_EQ(lower.find("<link"), std::string::npos);
  EXPECT_EQ(lower.find("url("), std::string::npos);
  EXPECT_EQ(lower.find("<script"), std::string::npos);
  EXPECT_EQ(lower.find("@import"), std::string::npos);
}

/// Decodes every embedded image, checks it is a real PNG, returns how many there are.
int check_embedded_pngs(const std::string& html, int min_width) {
  const std::string marker = "data:image/png;base64,";
  int n = 0;
  for (size_t at = html.find(marker); at != std::string::npos; at = html.find(marker, at + 1)) {
    const size_t start = at + marker.size();
    const size_t end = html.find('"', start);
    const QByteArray png = QByteArray::fromBase64(QByteArray::fromStdString(html.substr(start, end - start)));
    EXPECT_EQ(png.left(8), QByteArray("\x89PNG\r\n\x1a\n", 8));
    QImage image;
    EXPECT_TRUE(image.loadFromData(png, "PNG"));
    EXPECT_GE(image.width(), min_width);
    // A chart, not a blank image: more than a handful of distinct colors.
    std::set<QRgb> colors;
    for (int y = 0; y < image.height(); y += 7)
      for (int x = 0; x < image.width(); x += 7)
        colors.insert(image.pixel(x, y));
    EXPECT_GT(colors.size(), 8u);
    ++n;
  }
  return n;
}

TEST_F(ReportFiles, HtmlRunReportHoldsTheNumbersAndEmbeddedCharts) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("run.html");
  write_report(store, {m_runs.a}, Format::html, path);
  const std::string html = read_file(path);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("Run report: cnn-fashion"), std::string::npos);
  EXPECT_NE(html.find(m_runs.a), std::string::npos);
  EXPECT_NE(html.find("finished"), std::string::npos);
  EXPECT_NE(html.find("local"), std::string::npos);              // the instance
  EXPECT_NE(html.find("AMD EPYC test CPU"), std::string::npos);  // the device
  // The metric table: test/accuracy last 0.875, min 0.8125; train/loss last = min = 2/(1+6) = 0.2857,
  // max = 2/1.1 = 1.818; model/bytes with separators; the cost.
  for (const char* number : {">0.875<", ">0.8125<", ">0.2857<", ">1.818<", ">1,234,567<", ">0.00123<", ">-7.25e+17<"})
    EXPECT_NE(html.find(number), std::string::npos) << number;
  EXPECT_NE(html.find("87.50%"), std::string::npos);  // the headline card
  // The config, the events and the artifact.
  EXPECT_NE(html.find(">lr<"), std::string::npos);
  EXPECT_NE(html.find(">0.05<"), std::string::npos);
  EXPECT_NE(html.find("test accuracy 0.8125"), std::string::npos);
  EXPECT_NE(html.find(m_dir.file("model.safetensors")), std::string::npos);
  // The metric name is escaped, never raw markup.
  EXPECT_NE(html.find("weird,metric &quot;q&quot;"), std::string::npos);
  // Charts: train/loss, test/accuracy and the weird metric have 2+ samples; model/bytes has one.
  EXPECT_EQ(check_embedded_pngs(html, 800), 3);
  expect_self_contained(html);
}

TEST_F(ReportFiles, HtmlComparisonHasTheConfigDiffAndOverlaidCharts) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("cmp.html");
  write_report(store, {m_runs.a, m_runs.b}, Format::html, path);
  const std::string html = read_file(path);
  EXPECT_NE(html.find("Comparison of 2 runs"), std::string::npos);
  EXPECT_NE(html.find("cnn-fashion-pruned"), std::string::npos);
  EXPECT_NE(html.find(m_runs.b), std::string::npos);
  // The differing keys (every config key that differs, as the store flattens them) are marked.
  const ConfigDiff diff = store.diff_configs({m_runs.a, m_runs.b});
  ASSERT_EQ(diff.differing.size(), 2u);  // name and train.lr
  EXPECT_NE(html.find("Settings that differ (2)"), std::string::npos);
  for (const ConfigDiff::Row& row : diff.differing) {
    const size_t at = html.find("&#8800;&nbsp;" + row.key + "<");
    ASSERT_NE(at, std::string::npos) << row.key;
    const size_t row_end = html.find("</tr>", at);
    for (const auto& v : row.values)
      EXPECT_NE(html.substr(at, row_end - at).find(">" + *v + "<"), std::string::npos) << row.key << " " << *v;
  }
  EXPECT_NE(html.find("Settings shared by all runs (" + std::to_string(diff.same) + ")"), std::string::npos);
  // Both runs' numbers; the better test accuracy (0.875 > 0.84375) in bold.
  EXPECT_NE(html.find("<b>0.875</b>"), std::string::npos);
  EXPECT_NE(html.find(">0.8438<"), std::string::npos);
  EXPECT_NE(html.find(">654,321<"), std::string::npos);
  // Charts of the union of metrics with 2+ samples: train/loss (both runs), test/accuracy, weird.
  EXPECT_EQ(check_embedded_pngs(html, 800), 3);
  expect_self_contained(html);
}

TEST_F(ReportFiles, FailedRunShowsItsError) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("failed.html");
  write_report(store, {m_runs.failed}, Format::html, path);
  const std::string html = read_file(path);
  EXPECT_NE(html.find("failed"), std::string::npos);
  EXPECT_NE(html.find("<b>Error:</b> out of memory on device 0"), std::string::npos);
}

/// Text of a PDF through pdftotext; nullopt when poppler-utils is not installed.
std::optional<std::string> pdf_text(const std::string& pdf_path) {
  if (test::run_shell("command -v pdftotext").code != 0)
    return std::nullopt;
  const test::CmdResult r = test::run_shell("pdftotext -layout '" + pdf_path + "' -");
  EXPECT_EQ(r.code, 0) << r.out;
  return r.out;
}

TEST_F(ReportFiles, PdfIsARealMultiPageDocument) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("cmp.pdf");
  write_report(store, {m_runs.a, m_runs.b}, Format::pdf, path);
  const std::string pdf = read_file(path);
  EXPECT_EQ(pdf.rfind("%PDF-1.", 0), 0u);
  EXPECT_NE(pdf.find("%%EOF", pdf.size() - 16), std::string::npos);
  EXPECT_GT(pdf.size(), 30'000u);  // three embedded chart images at print resolution
  const size_t pages = count_of(pdf, "/Type /Page\n") + count_of(pdf, "/Type /Page ") + count_of(pdf, "/Type /Page/");
  EXPECT_GE(pages, 2u);
  EXPECT_GE(count_of(pdf, "/Subtype /Image"), 3u);
}

TEST_F(ReportFiles, PdfTextHoldsTheNumbers) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("run.pdf");
  write_report(store, {m_runs.a}, Format::pdf, path);
  const auto text = pdf_text(path);
  if (!text)
    GTEST_SKIP() << "pdftotext (poppler-utils, in scripts/install-deps.sh) is not installed: PDF text not checked";
  for (const std::string& s : {std::string("Run report: cnn-fashion"), m_runs.a, std::string("0.875"),
                               std::string("0.8125"), std::string("1,234,567"), std::string("page 1 of")})
    EXPECT_NE(text->find(s), std::string::npos) << s << "\n--- text ---\n" << text->substr(0, 3000);
}

TEST_F(ReportFiles, RunsMayBeGivenByPrefixOrName) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("by-name.csv");
  write_report(store, {"mlp-oom", "20260101-13"}, Format::csv, path);
  const auto rows = test::parse_csv(read_file(path));
  std::set<std::string> ids;
  for (size_t i = 1; i < rows.size(); ++i)
    ids.insert(rows[i][0]);
  EXPECT_EQ(ids, (std::set<std::string>{m_runs.failed, m_runs.b}));
}

template <class E>
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no error";
}

TEST_F(ReportFiles, BadInputIsRejectedAndNothingIsWritten) {
  Store store = Store::open(db());
  const std::string out = m_dir.file("x.html");
  std::string m = error_of<DataError>([&] { write_report(store, {"no-such-run"}, Format::html, out); });
  EXPECT_NE(m.find("no run matches \"no-such-run\""), std::string::npos) << m;
  m = error_of<DataError>([&] { write_report(store, {m_runs.a}, Format::html, "/nonexistent-folder/x.html"); });
  EXPECT_NE(m.find("/nonexistent-folder/x.html"), std::string::npos) << m;
  EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
  m = error_of<DataError>([&] { write_report(store, {m_runs.a}, Format::csv, m_dir.path().string()); });
  EXPECT_NE(m.find("is a folder"), std::string::npos) << m;
  m = error_of<ConfigError>([&] { write_report(store, {}, Format::csv, out); });
  EXPECT_NE(m.find("at least one run"), std::string::npos) << m;
  m = error_of<ConfigError>([&] { write_report(store, {m_runs.a, "cnn-fashion"}, Format::csv, out); });
  EXPECT_NE(m.find("given twice"), std::string::npos) << m;
  // An ambiguous prefix lists the candidates.
  m = error_of<DataError>([&] { write_report(store, {"20260101"}, Format::csv, out); });
  EXPECT_NE(m.find("matches 3 runs"), std::string::npos) << m;
  // No output and no temporary file left behind by any failure.
  for (const auto& entry : test::fs::directory_iterator(m_dir.path()))
    EXPECT_TRUE(entry.path().filename() == "lathe.db" || entry.path().filename().string().rfind("lathe.db", 0) == 0 ||
                entry.path().filename() == "model.safetensors")
        << "left behind: " << entry.path();
}

TEST_F(ReportFiles, ExistingFileIsReplacedWhole) {
  Store store = Store::open(db());
  const std::string path = m_dir.file("again.csv");
  std::ofstream(path) << std::string(1 << 20, 'x');  // longer than the report
  write_report(store, {m_runs.failed}, Format::csv, path);
  const auto rows = test::parse_csv(read_file(path));
  EXPECT_EQ(rows.size(), 3u);  // header + 2 samples, none of the old bytes
}

}  // namespace
}  // namespace lathe::report
