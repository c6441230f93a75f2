// lathe: the desktop app. `lathe [CONFIG.json] [--db STORE]` opens the designer on CONFIG (default
// experiments/default.json). `--screenshot FILE` renders the main window to a PNG and exits (works
// with QT_QPA_PLATFORM=offscreen); --run, --stop-after-ms, --watch, --compare, --overview, --scatter,
// --sweep, --parallel and --tab script what the screenshot shows (used for README screenshots and the
// Xvfb check).
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QTimer>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "app/gui/app_paths.h"
#include "app/gui/main_window.h"
#include "widgets/common/offscreen_app.h"

namespace {

void waitMs(int ms) {
  QElapsedTimer t;
  t.start();
  while (t.elapsed() < ms)
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
}

/// Without a display Qt aborts with a plugin message that tells a user nothing. A screenshot needs no
/// display (offscreen); anything else gets a clear error and the ways to go on. False: do not start.
bool checkDisplay(int argc, char** argv) {
  auto set = [](const char* v) { return v && *v; };
  if (set(std::getenv("QT_QPA_PLATFORM")) || set(std::getenv("DISPLAY")) || set(std::getenv("WAYLAND_DISPLAY")))
    return true;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--screenshot", 12) == 0 || std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--version") == 0) {
      lathe::widgets::use_offscreen_platform();
      return true;
    }
  std::fprintf(stderr,
               "lathe: no display (DISPLAY and WAYLAND_DISPLAY are unset), so the window cannot open.\n"
               "  run the experiment headless:   lathe-cli run experiments/default.json\n"
               "  render the window to a PNG:    lathe --screenshot shot.png\n"
               "  use a virtual display:         xvfb-run -a lathe\n");
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (!checkDisplay(argc, argv))
    return 2;
  QApplication app(argc, argv);
  QApplication::setApplicationName("lathe");
  QApplication::setApplicationVersion(LATHE_VERSION);
  QCommandLineParser cli;
  cli.setApplicationDescription("Lathe: design, run, watch and compare compute-optimization experiments.");
  cli.addHelpOption();
  cli.addVersionOption();
  cli.addPositionalArgument("config", "Experiment JSON to open (default: experiments/default.json)", "[config]");
  const QCommandLineOption db("db", "The run store (SQLite); default: lathe-cli's", "file");
  const QCommandLineOption shot("screenshot", "Render the main window to a PNG file and exit", "file");
  const QCommandLineOption config("config", "Experiment JSON to open (same as the positional argument)", "file");
  const QCommandLineOption tab("tab", "Tab to show: live, runs or compare", "name", "live");
  const QCommandLineOption run("run", "Queue the opened experiment at start");
  const QCommandLineOption stopAfter("stop-after-ms", "With --run: press Stop after this many ms", "ms");
  const QCommandLineOption watch("watch", "Watch this run (id, prefix) in the live charts", "run");
  const QCommandLineOption compare("compare", "Compare these runs (comma-separated ids)", "runs");
  const QCommandLineOption overview("overview", "Show this run's overview (the Overview tab)", "run");
  const QCommandLineOption comparePage(
      "compare-page", "Compare page to show: config, metrics, curves, scatter, groups or \"what matters\"", "name",
      "config");
  const QCommandLineOption scatter(
      "scatter", "Compare scatter axes (with --compare-page groups: the groups' scatter): X,Y metric names", "x,y");
  const QCommandLineOption parallel(
      "parallel",
      "Runs tab with parallel coordinates of every run: comma-separated axes (knob keys, \"last METRIC\", "
      "\"best METRIC\"), or \"default\"",
      "axes");
  const QCommandLineOption sweep("sweep",
                                 "Runs tab showing only this sweep's runs (id, unique id prefix or name), as its "
                                 "sweep filter does; with --parallel the parallel coordinates cover them",
                                 "sweep");
  const QCommandLineOption wait("wait-ms", "With --screenshot: wait this long before rendering", "ms", "1500");
  const QCommandLineOption waitIdle("wait-idle", "With --screenshot: first wait until queued runs end (max 10 min)");
  const QCommandLineOption size("size", "Window size WxH", "size", "1480x900");
  cli.addOptions({db, shot, config, tab, run, stopAfter, watch, compare, overview, comparePage, scatter, sweep, parallel,
                  wait, waitIdle, size});
  cli.process(app);

  lathe::app::WindowOptions opt;
  opt.dbPath = cli.isSet(db) ? cli.value(db) : lathe::app::defaultStorePath();
  opt.cliPath = lathe::app::findLatheCli();
  opt.experimentsDir = lathe::app::findExperimentsDir();
  opt.configPath = cli.isSet(config) ? cli.value(config) : cli.positionalArguments().value(0);
  if (!opt.configPath.isEmpty())
    opt.configPath = QFileInfo(opt.configPath).absoluteFilePath();

  lathe::app::MainWindow window(opt);
  const QStringList wh = cli.value(size).split('x');
  if (wh.size() == 2)
    window.resize(wh[0].toInt(), wh[1].toInt());
  const bool screenshot = cli.isSet(shot);
  window.setInteractive(!screenshot);
  window.show();
  window.showTab(cli.value(tab));
  if (cli.isSet(watch))
    window.watch(cli.value(watch));
  if (cli.isSet(overview))
    window.showOverview(cli.value(overview));
  if (cli.isSet(compare)) {
    window.compareRuns(cli.value(compare).split(',', Qt::SkipEmptyParts));
    window.showTab("compare");
    window.compare()->showPage(cli.value(comparePage));
    const QStringList axes = cli.value(scatter).split(',');
    if (cli.isSet(scatter) && axes.size() == 2)
      window.compare()->setScatterAxes(axes[0], axes[1]);
    if (cli.isSet(scatter) && axes.size() == 2 &&
        cli.value(comparePage) == "groups")  // the groups' scatter, once loaded
      QObject::connect(window.compare(), &lathe::ui::CompareView::loaded, window.compare(),
                       [&window, axes]() { window.compare()->groupPanel()->setScatterAxes(axes[0], axes[1]); });
  }
  if (cli.isSet(sweep)) {  // before --parallel, which reads the runs of the table's filter
    window.showTab("runs");
    const QString error = window.browser()->showSweepRef(cli.value(sweep));
    if (!error.isEmpty()) {
      std::fprintf(stderr, "lathe: --sweep: %s\n", error.toLocal8Bit().constData());
      return 2;
    }
  }
  if (cli.isSet(parallel)) {
    window.showTab("runs");
    const QStringList axes = cli.value(parallel).split(',', Qt::SkipEmptyParts);
    lathe::ui::ParallelCoordsPanel* panel = window.browser()->parallelPanel();
    if (axes != QStringList{"default"})
      QObject::connect(panel, &lathe::ui::ParallelCoordsPanel::loaded, panel, [panel, axes](const QString& error) {
        if (!error.isEmpty())
          return;
        std::vector<std::string> names;
        for (const QString& a : axes)
          names.push_back(a.trimmed().toStdString());
        try {
          panel->setAxes(names);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "lathe: --parallel: %s\n", e.what());
        }
      });
    window.browser()->parallelButton()->setChecked(true);
  }
  if (cli.isSet(run) && !window.runCurrent(!screenshot)) {
    std::fprintf(stderr, "lathe: the experiment is not valid:\n%s\n",
                 window.designer()->form()->errors().join("\n").toLocal8Bit().constData());
    if (screenshot)
      return 2;
  }
  if (cli.isSet(stopAfter))
    QTimer::singleShot(cli.value(stopAfter).toInt(), &window, &lathe::app::MainWindow::stop);
  if (!screenshot)
    return app.exec();

  if (cli.isSet(waitIdle))
    window.queue()->waitIdle(600'000);
  waitMs(cli.value(wait).toInt());
  window.charts()->refreshNow();
  QCoreApplication::processEvents();
  const QString file = cli.value(shot);
  if (!window.grab().save(file, "PNG")) {
    std::fprintf(stderr, "lathe: cannot write the screenshot %s (check the folder exists and is writable)\n",
                 file.toLocal8Bit().constData());
    return 1;
  }
  std::printf("%s\n", QDir::toNativeSeparators(file).toLocal8Bit().constData());
  return 0;
}
