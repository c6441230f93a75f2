// Store benchmark (issue #3 targets): ingest rate of committed samples while a reader tails the
// run, the time to list 10,000 runs with their summaries, and the time to load a 1,000,000-sample
// series downsampled to 2,000 buckets.
//   store_bench [--samples-per-metric N] [--metrics M] [--runs R] [--dir D] [--keep]
// Targets: ingest >= 300,000 samples/s; list 10,000 runs < 100 ms; downsample < 50 ms.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/store/aggregate.h"
#include "engine/store/run_writer.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"

namespace {

using Clock = std::chrono::steady_clock;
using lathe::Store;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct Options {
  int64_t samples_per_metric = 1'000'000;
  int metrics = 2;
  int runs = 10'000;
  std::string dir;
  bool keep = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--samples-per-metric")
      o.samples_per_metric = std::stoll(next());
    else if (a == "--metrics")
      o.metrics = std::stoi(next());
    else if (a == "--runs")
      o.runs = std::stoi(next());
    else if (a == "--dir")
      o.dir = next();
    else if (a == "--keep")
      o.keep = true;
    else {
      std::fprintf(stderr, "usage: store_bench [--samples-per-metric N] [--metrics M] [--runs R] [--dir D] [--keep]\n");
      std::exit(2);
    }
  }
  return o;
}

/// Ingest: one writer fed as fast as the producer can go, one reader tailing train/loss every
/// 100 ms like the GUI. Returns the run id.
std::string bench_ingest(const std::string& db, const Options& o) {
  std::vector<std::string> names = {"train/loss",  "train/accuracy", "train/lr", "train/samples_per_s",
                                    "device/util", "mem/peak_bytes", "cost/usd", "device/mfu"};
  names.resize(static_cast<size_t>(std::clamp(o.metrics, 1, 8)));
  lathe::RunWriter w(db);
  lathe::RunInfo info;
  info.name = "ingest";
  info.config = {{"train", {{"lr", 0.02}}}};
  const std::string id = w.begin_run(info);

  std::atomic<bool> done{false};
  int64_t polls = 0, tailed = 0;
  std::vector<double> poll_ms;
  std::thread reader([&] {
    Store s = Store::open(db);
    int64_t next = 0;
    while (!done.load()) {
      const auto t = Clock::now();
      const std::vector<lathe::Point> pts = s.series(id, "train/loss", next);
      s.summary(id, "train/loss");
      poll_ms.push_back(ms_since(t));
      if (!pts.empty())
        next = pts.back().step + 1;
      tailed += static_cast<int64_t>(pts.size());
      ++polls;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  const int64_t total = o.samples_per_metric * static_cast<int64_t>(names.size());
  std::vector<double> call_us;
  call_us.reserve(static_cast<size_t>(total / 64 + 1));
  const auto t0 = Clock::now();
  for (int64_t step = 0; step < o.samples_per_metric; ++step) {
    const double wall = static_cast<double>(step) * 0.1;
    for (size_t m = 0; m < names.size(); ++m) {
      const double v = std::sin(static_cast<double>(step) * 1e-3 + static_cast<double>(m)) + 1e-6 * step;
      if ((step & 63) == 0) {
        const auto tc = Clock::now();
        w.sample(names[m], step, wall, v);
        call_us.push_back(ms_since(tc) * 1000.0);
      } else {
        w.sample(names[m], step, wall, v);
      }
    }
  }
  const double produce_ms = ms_since(t0);
  w.flush();
  const double commit_ms = ms_since(t0);
  done = true;
  reader.join();
  w.finish(lathe::RunStatus::finished);

  const double rate = static_cast<double>(w.committed_samples()) / (commit_ms / 1000.0);
  std::printf(
      "ingest: %lld samples (%zu metrics x %lld steps) committed in %.0f ms = %.0f samples/s  [target >= 300000: %s]\n",
      static_cast<long long>(w.committed_samples()), names.size(), static_cast<long long>(o.samples_per_metric),
      commit_ms, rate, rate >= 300000 ? "PASS" : "MISS");
  std::printf(
      "        producer done after %.0f ms; sample() call p50 %.2f us, p99 %.2f us, max %.0f us "
      "(max includes waits when the 1M-row queue was full)\n",
      produce_ms, percentile(call_us, 0.5), percentile(call_us, 0.99), percentile(call_us, 1.0));
  std::printf("        tailing reader: %lld polls, %lld points seen, poll p50 %.2f ms, max %.2f ms\n",
              static_cast<long long>(polls), static_cast<long long>(tailed), percentile(poll_ms, 0.5),
              percentile(poll_ms, 1.0));
  return id;
}

void bench_downsample(const std::string& db, const std::string& id) {
  Store s = Store::open(db);
  std::vector<double> t;
  lathe::DownsampledSeries d;
  for (int i = 0; i < 21; ++i) {
    const auto t0 = Clock::now();
    d = s.downsample(id, "train/loss", 2000);
    t.push_back(ms_since(t0));
  }
  int64_t count = 0;
  for (const lathe::Bucket& b : d.buckets)
    count += b.count;
  const double first = t.front(), med = median(t);
  std::printf(
      "downsample: %lld samples -> %zu buckets (width %lld, %zu points to draw): first %.2f ms, median %.2f ms"
      "  [target < 50: %s]\n",
      static_cast<long long>(count), d.buckets.size(), static_cast<long long>(d.bucket_width), d.points().size(), first,
      med, med < 50 ? "PASS" : "MISS");
  const auto t0 = Clock::now();
  const size_t raw = s.series(id, "train/loss").size();
  std::printf("            (for scale: reading all %zu raw samples takes %.0f ms)\n", raw, ms_since(t0));
}

void bench_list(const std::string& db, int runs) {
  const std::vector<std::string> metrics = {"train/loss",          "train/accuracy", "test/loss", "test/accuracy",
                                            "train/samples_per_s", "model/bytes",    "cost/usd",  "device/mfu"};
  {
    Store s = Store::open(db);
    const auto t0 = Clock::now();
    std::vector<std::string> ids;
    for (int i = 0; i < runs; ++i) {
      lathe::RunInfo info;
      char id[32];
      std::snprintf(id, sizeof(id), "20260101-%06d-%06x", i / 100, i * 2654435761u & 0xffffffu);
      info.id = id;
      info.name = "sweep-" + std::to_string(i % 50);
      info.config = {{"name", info.name},
                     {"seed", i},
                     {"train", {{"lr", 0.001 * (i % 20)}, {"epochs", 5}, {"batch_size", 128}}},
                     {"prune", {{"ratio", 0.1 * (i % 10)}}}};
      ids.push_back(s.create_run(info, lathe::RunStatus::finished));
    }
    // Summaries written directly (a RunWriter per run would only make the set-up slow).
    lathe::sql::Db& raw = s.db();
    lathe::sql::Txn txn(raw, lathe::sql::Txn::Kind::write);
    lathe::sql::Stmt key = raw.prepare("INSERT OR IGNORE INTO metric_keys(name, direction) VALUES(?, ?)");
    for (const std::string& m : metrics)
      key.bind(1, m).bind(2, static_cast<int64_t>(lathe::default_direction(m))).run();
    lathe::sql::Stmt up = raw.prepare(lathe::store_detail::summary_upsert_sql());
    for (int i = 0; i < runs; ++i) {
      const int64_t rid =
          raw.query_int("SELECT rid FROM runs WHERE id = '" + ids[static_cast<size_t>(i)] + "'").value();
      for (size_t m = 0; m < metrics.size(); ++m) {
        lathe::store_detail::Agg a;
        for (int64_t step = 0; step < 3; ++step)
          a.add({step * 1000, step * 10.0, std::sin(i + m + step)});
        const int64_t mid = raw.query_int("SELECT id FROM metric_keys WHERE name = '" + metrics[m] + "'").value();
        up.bind(1, rid).bind(2, mid);
        lathe::store_detail::bind_agg(up, 3, a);
        up.run();
      }
      lathe::store_detail::refresh_summary_pack(raw, rid);  // what RunWriter does in each batch
    }
    txn.commit();
    std::printf("list: created %d runs with %zu metric summaries each in %.0f ms\n", runs, metrics.size(),
                ms_since(t0));
  }
  Store s = Store::open(db);
  const auto time_query = [&](const lathe::RunQuery& q, const char* what, bool target) {
    std::vector<double> t;
    lathe::RunPage page;
    for (int i = 0; i < 11; ++i) {
      const auto t0 = Clock::now();
      page = s.list_runs(q);
      t.push_back(ms_since(t0));
    }
    size_t sums = 0;
    for (const auto& r : page.runs)
      sums += r.metrics.size();
    const double med = median(t);
    std::printf("list: %-44s %5zu runs, %6zu summaries: median %.1f ms, first %.1f ms%s\n", what, page.runs.size(),
                sums, med, t.front(), target ? (med < 100 ? "  [target < 100: PASS]" : "  [target < 100: MISS]") : "");
  };
  lathe::RunQuery all;
  all.limit = runs;
  time_query(all, "all runs, newest first, every summary", true);
  lathe::RunQuery best = all;
  best.sort = lathe::RunQuery::Sort::metric_best;
  best.sort_metric = "test/accuracy";
  time_query(best, "all runs sorted by best test/accuracy", true);
  lathe::RunQuery page;
  page.limit = 100;
  page.offset = 1000;
  page.name_glob = "sweep-1*";
  page.params = {{"train.epochs", "5"}};
  time_query(page, "a 100-run page with a name glob and a param", false);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  namespace fs = std::filesystem;
  const fs::path dir =
      o.dir.empty() ? fs::temp_directory_path() / ("lathe_store_bench_" + std::to_string(getpid())) : fs::path(o.dir);
  fs::create_directories(dir);
  const std::string ingest_db = (dir / "ingest.db").string(), list_db = (dir / "list.db").string();
  for (const std::string& f : {ingest_db, list_db})
    for (const char* suffix : {"", "-wal", "-shm"})
      fs::remove(f + suffix);
  try {
    std::printf("store_bench: SQLite %s, store in %s\n", sqlite3_libversion(), dir.c_str());
    const std::string id = bench_ingest(ingest_db, o);
    bench_downsample(ingest_db, id);
    bench_list(list_db, o.runs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_bench: %s\n", e.what());
    return 1;
  }
  if (!o.keep)
    fs::remove_all(dir);
  return 0;
}
