// parallel_bench: parallel coordinates and the run table over 10,000 synthetic runs in a
// temporary store (issue 17 acceptance): how long brushing an axis takes until the selection is
// updated (the model's brushed runs, the plot's curves and the run table's selected rows), with
// and without the replot that shows it, the replot rate of the plot with every run drawn, and a
// change of the Runs tab's filter reloading the parallel coordinates (once; not for the same filter).
// Offscreen; prints a table. Targets: brush -> selection < 100 ms, replot >= 30 frames/s.
// Usage: parallel_bench [--runs N] [--seconds S]
#include <unistd.h>
#include <QApplication>
#include <QElapsedTimer>
#include <QItemSelectionModel>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/timing.h"
#include "engine/store/aggregate.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "widgets/common/offscreen_app.h"
#include "widgets/ui/parallel_coords_panel.h"
#include "widgets/ui/run_browser.h"

namespace {

using namespace lathe;
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// `runs` finished runs of a 4-knob study (lr log-spaced, batch size, optimizer, prune ratio,
/// seed) with accuracy, loss, samples/s and $ summaries, written straight into the store.
void write_store(const std::string& db, int runs) {
  const std::vector<std::string> metrics = {"test/accuracy", "train/loss", "train/samples_per_s", "cost/usd"};
  Store s = Store::open(db);
  std::vector<std::string> ids;
  const char* optimizers[] = {"sgd", "adamw", "lion"};
  for (int i = 0; i < runs; ++i) {
    RunInfo info;
    char id[32];
    std::snprintf(id, sizeof(id), "20260101-%06d-%06x", i / 100, i * 2654435761u & 0xffffffu);
    info.id = id;
    info.name = "study lr=" + std::to_string(i % 20);
    info.config = {{"name", "study"},
                   {"seed", i % 5},
                   {"train",
                    {{"batch_size", 32 << (i % 4)},
                     {"optimizer", {{"name", optimizers[i % 3]}, {"lr", 1e-4 * std::pow(10.0, (i % 20) / 6.0)}}}}},
                   {"prune", {{"ratio", 0.1 * (i % 10)}}}};
    ids.push_back(s.create_run(info, RunStatus::finished));
  }
  sql::Db& raw = s.db();
  sql::Txn txn(raw, sql::Txn::Kind::write);
  sql::Stmt key = raw.prepare("INSERT OR IGNORE INTO metric_keys(name, direction) VALUES(?, ?)");
  for (const std::string& m : metrics)
    key.bind(1, m).bind(2, static_cast<int64_t>(default_direction(m))).run();
  sql::Stmt up = raw.prepare(store_detail::summary_upsert_sql());
  std::vector<int64_t> mids;
  for (const std::string& m : metrics)
    mids.push_back(raw.query_int("SELECT id FROM metric_keys WHERE name = '" + m + "'").value());
  for (int i = 0; i < runs; ++i) {
    const int64_t rid = raw.query_int("SELECT rid FROM runs WHERE id = '" + ids[static_cast<size_t>(i)] + "'").value();
    for (size_t m = 0; m < metrics.size(); ++m) {
      store_detail::Agg a;
      for (int64_t step = 0; step < 3; ++step)
        a.add({step * 1000, step * 10.0, 0.5 + 0.4 * std::sin(0.37 * i + 1.3 * m + step)});
      up.bind(1, rid).bind(2, mids[m]);
      store_detail::bind_agg(up, 3, a);
      up.run();
    }
    store_detail::refresh_summary_pack(raw, rid);
  }
  txn.commit();
}

}  // namespace

int main(int argc, char** argv) {
  widgets::use_offscreen_platform();
  QApplication app(argc, argv);
  int runs = 10'000;
  double seconds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--runs")
      runs = std::atoi(argv[i + 1]);
    else if (k == "--seconds")
      seconds = std::atof(argv[i + 1]);
  }
  const auto dir = std::filesystem::temp_directory_path() / ("lathe_parallel_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "lathe.db").string();
  auto t0 = Clock::now();
  write_store(db, runs);
  std::printf("setup: %d runs with 4 metric summaries written to %s in %.1f s\n", runs, db.c_str(),
              seconds_since(t0));

  ui::RunBrowser browser(QString::fromStdString(db));
  browser.resize(1400, 900);
  browser.show();
  QElapsedTimer wait;
  wait.start();
  while ((browser.model()->loading() || browser.model()->rowCount() == 0) && wait.elapsed() < 60000)
    app.processEvents(QEventLoop::AllEvents, 20);
  ui::ParallelCoordsPanel* panel = browser.parallelPanel();
  bool loaded = false;
  QObject::connect(panel, &ui::ParallelCoordsPanel::loaded, [&](const QString&) { loaded = true; });
  t0 = Clock::now();
  browser.parallelButton()->setChecked(true);
  while (!loaded && wait.elapsed() < 120000)
    app.processEvents(QEventLoop::AllEvents, 20);
  const double loadMs = 1e3 * seconds_since(t0);
  if (panel->model().runCount() != static_cast<size_t>(runs)) {
    std::fprintf(stderr, "parallel_bench: %zu runs loaded, %d expected\n", panel->model().runCount(), runs);
    return 1;
  }
  panel->setAxes({"train.optimizer.lr", "train.batch_size", "train.optimizer.name", "prune.ratio", "seed",
                  "last train/loss", "last test/accuracy"});
  panel->model().setLog(0, true);
  panel->plot()->rebuild();
  app.processEvents();
  ui::ParallelCoordsPlot* plot = panel->plot();
  std::printf("plot: %d x %d px, %zu runs x %zu axes; load (store read on a worker thread + model) %.0f ms\n",
              plot->width(), plot->height(), panel->model().runCount(), panel->model().axisCount(), loadMs);

  // Brushing: a drag along the accuracy axis is one brushAxis per mouse move.
  // *_cpu: this (the GUI) thread's CPU time: on a machine shared with other jobs the wall time is
  // mostly waiting for a core, and this is what the work itself costs.
  std::vector<double> select_ms, shown_ms, select_cpu, shown_cpu, second_cpu;
  size_t selectedTable = 0, selectedRuns = 0, selection = 0;
  for (int i = 0; i < 40; ++i) {
    const double lo = 0.05 + 0.02 * (i % 20), hi = lo + 0.3 + 0.01 * (i % 7);
    t0 = Clock::now();
    const double c0 = thread_cpu_seconds();
    plot->brushAxis(6, lo, hi);  // model, curves, brushedRuns -> the run table's selection
    select_ms.push_back(1e3 * seconds_since(t0));
    select_cpu.push_back(1e3 * (thread_cpu_seconds() - c0));
    plot->replot(QCustomPlot::rpImmediateRefresh);
    shown_ms.push_back(1e3 * seconds_since(t0));
    shown_cpu.push_back(1e3 * (thread_cpu_seconds() - c0));
    selectedRuns = panel->model().selectedCount();
    selection = static_cast<size_t>(browser.selectedRunIds().size());
    selectedTable = static_cast<size_t>(browser.table()->selectionModel()->selectedRows().size());
  }
  // A second brush on another axis (the selection is the intersection).
  std::vector<double> second_ms;
  for (int i = 0; i < 20; ++i) {
    t0 = Clock::now();
    const double c0 = thread_cpu_seconds();
    plot->brushAxis(3, 0.1 + 0.02 * i, 0.7);
    plot->replot(QCustomPlot::rpImmediateRefresh);
    second_ms.push_back(1e3 * seconds_since(t0));
    second_cpu.push_back(1e3 * (thread_cpu_seconds() - c0));
  }

  // Replot rate with every run drawn (no brush: all runs in the colour buckets), then brushed.
  struct Rate {
    double wall, cpu;  // frames/s by wall time, and by this thread's CPU time
  };
  const auto rate = [&](bool brushed) {
    if (brushed)
      plot->brushAxis(6, 0.2, 0.6);
    else
      panel->clearBrushes();
    int frames = 0;
    const auto start = Clock::now();
    const double c0 = thread_cpu_seconds();
    while (seconds_since(start) < seconds) {
      plot->replot(QCustomPlot::rpImmediateRefresh);
      ++frames;
    }
    return Rate{frames / seconds_since(start), frames / (thread_cpu_seconds() - c0)};
  };
  const Rate all = rate(false), brushed = rate(true);
  // What the frame costs without the lines (axes, labels, brush bands): the rest is the lines.
  std::vector<QCPLayerable*> hidden;
  for (QCPLayerable* l : plot->layer("main")->children())
    if (!dynamic_cast<QCPAbstractItem*>(l) && !dynamic_cast<QCPAbstractPlottable*>(l) && l->visible()) {
      l->setVisible(false);
      hidden.push_back(l);
    }
  const Rate bare = rate(true);
  for (QCPLayerable* l : hidden)
    l->setVisible(true);
  const auto mx = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  // The worst case for the drawing: seven continuous axes (metric summaries), where no two runs
  // share a segment; brushed, so every frame rebuilds the segments.
  panel->setAxes({"last train/loss", "best train/loss", "last cost/usd", "best cost/usd", "last train/samples_per_s",
                  "best test/accuracy", "last test/accuracy"});
  std::vector<double> cont_ms, cont_cpu;
  for (int i = 0; i < 20; ++i) {
    t0 = Clock::now();
    const double c0 = thread_cpu_seconds();
    plot->brushAxis(6, 0.05 + 0.02 * i, 0.8);
    plot->replot(QCustomPlot::rpImmediateRefresh);
    cont_ms.push_back(1e3 * seconds_since(t0));
    cont_cpu.push_back(1e3 * (thread_cpu_seconds() - c0));
  }

  // The Runs tab's filter changes (a search matching 11 of the 20 lr values): the parallel
  // coordinates read that filter's runs again, on the worker thread; the same filter again (the
  // search box losing focus unchanged) reads nothing.
  loaded = false;
  browser.searchBox()->setText("lr=1");
  t0 = Clock::now();
  const double f0 = thread_cpu_seconds();
  emit browser.searchBox()->editingFinished();
  const double filterGuiCpu = 1e3 * (thread_cpu_seconds() - f0);
  while (!loaded && (1e3 * seconds_since(t0)) < 120000)
    app.processEvents(QEventLoop::AllEvents, 20);
  const double filterMs = (1e3 * seconds_since(t0));
  const size_t filterRuns = panel->model().runCount();
  loaded = false;
  t0 = Clock::now();
  emit browser.searchBox()->editingFinished();
  while (!loaded && (1e3 * seconds_since(t0)) < 1000)
    app.processEvents(QEventLoop::AllEvents, 20);
  const bool reloadedSame = loaded;

  std::printf(
      "\n| what (%d runs x 7 axes, %u CPU threads, offscreen) | wall median | wall max | CPU median | target |\n", runs,
      std::thread::hardware_concurrency());
  std::printf("|---|---|---|---|---|\n");
  std::printf(
      "| brush accuracy axis -> selection updated (model, lines, run table) | %.1f ms | %.1f ms | %.1f ms | < 100 ms "
      "|\n",
      median(select_ms), mx(select_ms), median(select_cpu));
  std::printf("| brush accuracy axis -> selection updated and replotted | %.1f ms | %.1f ms | %.1f ms | < 100 ms |\n",
              median(shown_ms), mx(shown_ms), median(shown_cpu));
  std::printf("| second brush (prune.ratio) -> updated and replotted | %.1f ms | %.1f ms | %.1f ms | < 100 ms |\n",
              median(second_ms), mx(second_ms), median(second_cpu));
  std::printf("| replot, every run drawn, no brush | %.1f frames/s | | %.1f frames/s | >= 30 frames/s |\n", all.wall,
              all.cpu);
  std::printf("| replot, brushed (grey + colour lines) | %.1f frames/s | | %.1f frames/s | >= 30 frames/s |\n",
              brushed.wall, brushed.cpu);
  std::printf(
      "| 7 continuous axes (no shared segments): brush -> replotted | %.1f ms | %.1f ms | %.1f ms | < 100 ms |\n",
      median(cont_ms), mx(cont_ms), median(cont_cpu));
  std::printf(
      "| replot without the lines (axes, labels, bands; %zu layerable hidden) | %.1f frames/s | | %.1f frames/s | |\n",
      hidden.size(), bare.wall, bare.cpu);
  std::printf("\nfilter change (search \"lr=1\") -> parallel coordinates reloaded: %zu runs in %.0f ms (GUI thread CPU "
              "%.1f ms to start it); the same filter again reloads: %s\n",
              filterRuns, filterMs, filterGuiCpu, reloadedSame ? "yes" : "no");
  std::printf("last brush: %zu runs inside; the browser's selection %zu runs (all pages), %zu rows of the table's page "
              "selected\n",
              selectedRuns, selection, selectedTable);
  std::filesystem::remove_all(dir);
  return 0;
}
