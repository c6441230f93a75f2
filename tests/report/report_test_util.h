// Helpers for the report tests: a temporary folder, the offscreen QApplication the charts need,
// a store seeded with known runs (the test keeps its own copy of every sample written, which is
// the oracle the CSV is checked against), an RFC 4180 CSV reader and a command runner.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QApplication>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/store/run_writer.h"
#include "engine/store/store.h"
#include "tests/support/run_shell.h"
#include "widgets/common/offscreen_app.h"

namespace lathe::test {

namespace fs = std::filesystem;

inline void ensure_qapp() { widgets::offscreen_application("test_report"); }

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "lathe_report_" + std::to_string(::getpid());
    if (info)
      name += std::string("_") + info->test_suite_name() + "_" + info->name();
    m_path = fs::temp_directory_path() / name;
    fs::remove_all(m_path);
    fs::create_directories(m_path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
  std::string file(const std::string& name) const { return (m_path / name).string(); }
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// (run, metric, step) -> (wall_ms, value): what the test wrote.
using SampleKey = std::tuple<std::string, std::string, int64_t>;
using Written = std::map<SampleKey, std::pair<double, double>>;

struct SeededRuns {
  std::string a, b, failed;  ///< ids
  Written samples;
};

/// Three runs with known values:
///  a "cnn-fashion" (finished): train/loss 2/(1+0.1 s) at steps 1..60 (last 0.5, min 0.5),
///    test/accuracy 0.8125 @30, 0.875 @60; model/bytes 1234567 @60; cost/usd 0.00123 @60; a NaN
///    sample; a metric whose name holds a comma and a quote; an epoch and an artifact event;
///    instance "local"; train.lr 0.05.
///  b "cnn-fashion-pruned" (finished): train/loss 3/(1+0.2 s), test/accuracy 0.84375 @60, lr 0.1.
///  failed "mlp-oom" (failed with error "out of memory on device 0").
inline SeededRuns seed_runs(const std::string& db, const std::string& artifact_path) {
  SeededRuns s;
  auto put = [&](RunWriter& w, const std::string& id, const std::string& metric, int64_t step, double wall,
                 double value) {
    w.sample(metric, step, wall, value);
    s.samples[{id, metric, step}] = {wall, value};
  };
  {
    RunWriter w(db);
    RunInfo info;
    info.id = "20260101-120000-aaaa01";
    info.name = "cnn-fashion";
    info.config = {{"name", "cnn-fashion"},
                   {"model", {{"zoo", "cnn"}}},
                   {"train", {{"lr", 0.05}, {"epochs", 2}, {"batch_size", 128}}}};
    info.backend = "cpu";
    info.devices = {"AMD EPYC test CPU"};
    s.a = w.begin_run(info);
    w.event("started", {{"backend", "cpu"},
                        {"device", "AMD EPYC test CPU"},
                        {"instance", "local"},
                        {"price_usd_per_hour", 0.0},
                        {"total_steps", 60}});
    for (int64_t st = 1; st <= 60; ++st)
      put(w, s.a, "train/loss", st, 10.0 * st + 1.0 / 3.0, 2.0 / (1.0 + 0.1 * st));
    put(w, s.a, "test/accuracy", 30, 301.123456789012345, 0.8125);
    put(w, s.a, "test/accuracy", 60, 602.5, 0.875);
    put(w, s.a, "model/bytes", 60, 603, 1234567);
    put(w, s.a, "cost/usd", 60, 604, 0.00123);
    put(w, s.a, "weird,metric \"q\"", 1, 0.1, 1e-300);
    put(w, s.a, "weird,metric \"q\"", 2, 0.2, std::nan(""));
    put(w, s.a, "weird,metric \"q\"", 3, 0.3, -7.25e17);
    w.event("epoch", {{"epoch", 1}, {"step", 30}, {"test_accuracy", 0.8125}, {"test_loss", 0.5}});
    std::ofstream(artifact_path) << "weights";
    w.event("artifact", {{"kind", "model"}, {"path", artifact_path}, {"bytes", 7}});
    w.finish(RunStatus::finished);
  }
  {
    RunWriter w(db);
    RunInfo info;
    info.id = "20260101-130000-bbbb02";
    info.name = "cnn-fashion-pruned";
    info.config = {{"name", "cnn-fashion-pruned"},
                   {"model", {{"zoo", "cnn"}}},
                   {"train", {{"lr", 0.1}, {"epochs", 2}, {"batch_size", 128}}}};
    info.backend = "cpu";
    info.devices = {"AMD EPYC test CPU"};
    s.b = w.begin_run(info);
    for (int64_t st = 1; st <= 60; ++st)
      put(w, s.b, "train/loss", st, 11.0 * st, 3.0 / (1.0 + 0.2 * st));
    put(w, s.b, "test/accuracy", 60, 700, 0.84375);
    put(w, s.b, "model/bytes", 60, 701, 654321);
    w.finish(RunStatus::finished);
  }
  {
    RunWriter w(db);
    RunInfo info;
    info.id = "20260101-140000-cccc03";
    info.name = "mlp-oom";
    info.config = {{"name", "mlp-oom"}, {"model", {{"zoo", "mlp"}}}};
    s.failed = w.begin_run(info);
    put(w, s.failed, "train/loss", 1, 5, 2.25);
    put(w, s.failed, "train/loss", 2, 6, 2.125);
    w.finish(RunStatus::failed, {{"error", "out of memory on device 0"}});
  }
  return s;
}

/// Parses RFC 4180 CSV (quoted fields, "" escapes, CRLF or LF line ends).
inline std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, field_started = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"' && field.empty()) {
      quoted = field_started = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
      field_started = false;
    } else if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n')
        ++i;
      row.push_back(field);
      rows.push_back(row);
      row.clear();
      field.clear();
      field_started = false;
    } else {
      field += c;
      field_started = true;
    }
  }
  if (field_started || !field.empty() || !row.empty()) {
    row.push_back(field);
    rows.push_back(row);
  }
  return rows;
}

/// Occurrences of `needle` in `hay`.
inline size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + needle.size()))
    ++n;
  return n;
}

}  // namespace lathe::test
