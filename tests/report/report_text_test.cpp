// The report's text helpers against hand-computed values: table number format, headline format,
// durations, exact round-trip numbers, HTML escaping, RFC 4180 quoting, --format parsing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "engine/core/error.h"
#include "widgets/report/report.h"
#include "widgets/report/report_data.h"
#include "widgets/report/report_text.h"

namespace lathe::report {
namespace {

TEST(ReportText, TableNumbers) {
  EXPECT_EQ(format_value(0.875), "0.875");
  EXPECT_EQ(format_value(0.851234), "0.8512");
  EXPECT_EQ(format_value(0.00123), "0.00123");
  EXPECT_EQ(format_value(9999.4), "9999");
  EXPECT_EQ(format_value(12345.6), "12,346");
  EXPECT_EQ(format_value(1234567), "1,234,567");
  EXPECT_EQ(format_value(-1234567), "-1,234,567");
  EXPECT_EQ(format_value(100000), "100,000");
  EXPECT_EQ(format_value(2.5e18), "2.5e+18");
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(std::nan("")), "-");
}

TEST(ReportText, HeadlineNumbers) {
  EXPECT_EQ(format_headline("test/accuracy", 0.85123), "85.12%");
  EXPECT_EQ(format_headline("device/mfu", 0.5), "50.00%");
  EXPECT_EQ(format_headline("dist/comm_fraction", 0.125), "12.50%");
  EXPECT_EQ(format_headline("model/bytes", 1000), "1000 B");
  EXPECT_EQ(format_headline("model/bytes", 1536), "1.50 KiB");
  EXPECT_EQ(format_headline("model/bytes", 3 * 1024.0 * 1024.0), "3.00 MiB");
  EXPECT_EQ(format_headline("cost/usd", 0.00123), "$0.0012");
  EXPECT_EQ(format_headline("cost/usd", 123.456), "$123.46");
  // Below a cent, two significant digits: a cheap run's $ per accuracy point is not "$0.0000".
  EXPECT_EQ(format_headline("cost/usd_per_accuracy_point", 1.889e-05), "$0.000019");
  EXPECT_EQ(format_headline("cost/usd", 0.0), "$0.0000");
  EXPECT_EQ(format_headline("train/samples_per_s", 12345.6), "12,346 /s");
  EXPECT_EQ(format_headline("test/loss", 0.41234), "0.4123");
}

TEST(ReportText, Durations) {
  EXPECT_EQ(format_duration_s(0), "0:00");
  EXPECT_EQ(format_duration_s(83.4), "1:23");
  EXPECT_EQ(format_duration_s(3723), "1:02:03");
  EXPECT_EQ(format_duration_s(-1), "-");
  RunRecord r;
  EXPECT_EQ(run_duration(r), "-");
  r.started_ms = 1000;
  r.finished_ms = 1000 + 61'000;
  EXPECT_EQ(run_duration(r), "1:01");
}

TEST(ReportText, ExactNumbersReadBackBitForBit) {
  EXPECT_EQ(exact_number(0.1), "0.1");
  EXPECT_EQ(exact_number(1234567), "1234567");
  EXPECT_EQ(exact_number(std::nan("")), "NaN");
  for (double v : {1.0 / 3.0, 2.0 / 7.0, 1e-300, -7.25e17, std::numeric_limits<double>::denorm_min(),
                   std::numeric_limits<double>::max(), 301.123456789012345})
    EXPECT_EQ(std::strtod(exact_number(v).c_str(), nullptr), v) << exact_number(v);
}

TEST(ReportText, EscapingAndQuoting) {
  EXPECT_EQ(html_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  EXPECT_EQ(csv_field("train/loss"), "train/loss");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
}

TEST(ReportText, ParseFormat) {
  EXPECT_EQ(parse_format("html"), Format::html);
  EXPECT_EQ(parse_format("PDF"), Format::pdf);
  EXPECT_EQ(parse_format("csv"), Format::csv);
  EXPECT_EQ(format_name(Format::pdf), "pdf");
  try {
    parse_format("docx");
    FAIL() << "docx accepted";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--format"), std::string::npos) << m;
    EXPECT_NE(m.find("docx"), std::string::npos) << m;
    EXPECT_NE(m.find("html, pdf, csv"), std::string::npos) << m;
  }
}

TEST(ReportText, MetricOrder) {
  EXPECT_EQ(order_metrics({"zeta", "test/accuracy", "cost/usd", "train/loss", "alpha", "test/loss"}),
            (std::vector<std::string>{"train/loss", "test/loss", "test/accuracy", "cost/usd", "alpha", "zeta"}));
}

}  // namespace
}  // namespace lathe::report
