// HTML and PDF reports need a QApplication (the charts are Qt widgets): without one write_report
// says so instead of crashing, and CSV needs none. Checked in a fresh process (a gtest death-test
// child) because the other tests create the application.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <cstdio>
#include <cstdlib>

#include "engine/core/error.h"
#include "report_test_util.h"
#include "widgets/report/report.h"

namespace lathe::report {
namespace {

/// Runs in the death-test child (a fresh process with its own TempDir): exit 3 when write_report
/// refused with an error and wrote nothing, 0 when it wrote the file, 4/5 for anything else.
void report_without_app(const test::TempDir& dir, const std::string& id, Format format) {
  const std::string out = dir.file("report.out");
  int code = 5;
  if (QCoreApplication::instance()) {
    code = 4;
  } else {
    try {
      Store store = Store::open(dir.file("lathe.db"));
      write_report(store, {id}, format, out);
      code = test::fs::exists(out) ? 0 : 5;
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      code = test::fs::exists(out) ? 5 : 3;
    }
  }
  std::error_code ec;
  test::fs::remove_all(dir.path(), ec);  // the child ends with _Exit: no destructors
  std::_Exit(code);
}

TEST(ReportNoApp, HtmlAndPdfNeedAQApplicationCsvDoesNot) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // re-executes the binary: no QApplication there
  test::TempDir dir;
  const test::SeededRuns runs = test::seed_runs(dir.file("lathe.db"), dir.file("model.safetensors"));
  EXPECT_EXIT(report_without_app(dir, runs.a, Format::html), ::testing::ExitedWithCode(3),
              "create a QApplication first");
  EXPECT_EXIT(report_without_app(dir, runs.a, Format::pdf), ::testing::ExitedWithCode(3),
              "create a QApplication first");
  EXPECT_EXIT(report_without_app(dir, runs.a, Format::csv), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace lathe::report
