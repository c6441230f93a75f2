// Helpers for the GUI tests: a temporary store folder, runs written with the real RunWriter,
// waiting on a condition while the Qt event loop runs, loading a run browser's parallel
// coordinates, and where lathe-cli / presets are.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/store/run_writer.h"
#include "widgets/ui/run_browser.h"

namespace lathe::test {

class GuiTempDir {
 public:
  GuiTempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "lathe_gui_" + std::to_string(::getpid()) + "_";
    if (info)
      name += std::string(info->test_suite_name()) + "_" + info->name();
    m_path = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
  }
  ~GuiTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  std::string file(const std::string& name) const { return (m_path / name).string(); }
  std::string db() const { return file("lathe.db"); }
  QString qdb() const { return QString::fromStdString(db()); }

 private:
  std::filesystem::path m_path;
};

/// Runs the event loop until `done()` or `ms` pass; returns done().
inline bool wait_until(const std::function<bool()>& done, int ms) {
  QElapsedTimer t;
  t.start();
  while (!done() && t.elapsed() < ms)
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
  return done();
}

/// Does `start` (what makes `panel` read runs: opening it, a filter change, load()) and runs the
/// event loop until the panel's next `loaded`. Returns its error: "" when the runs are shown, or
/// "timed out" after `ms` (so a check that nothing reloads is `!= ""`).
inline std::string load_parallel(ui::ParallelCoordsPanel* panel, const std::function<void()>& start, int ms = 20000) {
  std::string error = "timed out";
  bool done = false;
  const QMetaObject::Connection c = QObject::connect(panel, &ui::ParallelCoordsPanel::loaded, [&](const QString& e) {
    error = e.toStdString();
    done = true;
  });
  start();
  wait_until([&]() { return done; }, ms);
  QObject::disconnect(c);
  return error;
}

/// Opens the browser's parallel coordinates (its button) and waits until they hold the filter's
/// runs; returns the load's error ("" = loaded).
inline std::string open_parallel(ui::RunBrowser& browser, int ms = 20000) {
  return load_parallel(
      browser.parallelPanel(), [&]() { browser.parallelButton()->setChecked(true); }, ms);
}

struct SyntheticMetric {
  std::string name;
  std::vector<double> values;  ///< value at step i+1
};

/// Writes a finished run with these metrics (step i+1, wall 10 ms per step) and returns its id.
inline std::string write_run(const std::string& db, const std::string& name, const nlohmann::json& config,
                             const std::vector<SyntheticMetric>& metrics) {
  RunWriter writer(db);
  RunInfo info;
  info.name = name;
  info.config = config;
  info.backend = "cpu";
  const std::string id = writer.begin_run(info);
  for (const auto& m : metrics)
    for (size_t i = 0; i < m.values.size(); ++i)
      writer.sample(m.name, static_cast<int64_t>(i + 1), 10.0 * (i + 1), m.values[i]);
  writer.finish(RunStatus::finished);
  return id;
}

inline std::string cli_path() { return std::string(LATHE_TEST_BINARY_DIR) + "/app/lathe-cli"; }
inline std::string experiments_dir() { return std::string(LATHE_TEST_SOURCE_DIR) + "/experiments"; }
inline bool fashion_mnist_present() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist") &&
         !std::filesystem::is_empty("/usr/share/datasets/fashion-mnist");
}

}  // namespace lathe::test
