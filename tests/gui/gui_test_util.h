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
#include "tests/support/synthetic_run.h"
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

inline std::string cli_path() { return std::string(LATHE_TEST_BINARY_DIR) + "/app/lathe-cli"; }
inline std::string experiments_dir() { return std::string(LATHE_TEST_SOURCE_DIR) + "/experiments"; }
inline bool fashion_mnist_present() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist") &&
         !std::filesystem::is_empty("/usr/share/datasets/fashion-mnist");
}

}  // namespace lathe::test
