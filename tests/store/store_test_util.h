// Helpers for the store tests: a fresh temporary folder per test and a brute-force reference
// aggregate to check the store's summaries and buckets against.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/store/aggregate.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store_types.h"

namespace lathe::test {

class StoreDir {
 public:
  StoreDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "lathe_store_" + std::to_string(::getpid()) + "_";
    if (info)
      name += std::string(info->test_suite_name()) + "_" + info->name();
    m_path = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
  }
  ~StoreDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  std::string file(const std::string& name) const { return (m_path / name).string(); }
  std::string db() const { return file("lathe.db"); }
  std::string path() const { return m_path.string(); }

 private:
  std::filesystem::path m_path;
};

/// count / first / last / min / max by a plain loop over the points with step in [lo, hi]
/// (`pts` sorted by step; NaN skipped for min/max; ties: the earliest).
struct Extremes {
  int64_t count = 0;
  bool any = false;
  Point first, last, min, max;
};
inline Extremes brute_extremes(const std::vector<Point>& pts, int64_t lo, int64_t hi) {
  Extremes e;
  auto it = std::lower_bound(pts.begin(), pts.end(), lo, [](const Point& p, int64_t s) { return p.step < s; });
  for (; it != pts.end() && it->step <= hi; ++it) {
    const Point& p = *it;
    if (e.count == 0)
      e.first = p;
    e.last = p;
    ++e.count;
    if (std::isnan(p.value))
      continue;
    if (!e.any || p.value < e.min.value)
      e.min = p;
    if (!e.any || p.value > e.max.value)
      e.max = p;
    e.any = true;
  }
  return e;
}

/// What one read transaction sees of a series whose steps are written 0, 1, 2, ... in order.
struct SeriesSnapshot {
  int64_t samples = 0, max_step = -1;
  int64_t summary_count = 0, summary_last_step = -1;
  int64_t pack_count = 0;                     // the count in runs.summary_pack
  int64_t block_counts[5] = {0, 0, 0, 0, 0};  // sum of counts at levels 1..5
  bool values_ok = true;                      // every value == value_of(step)
  /// Whole batches only: the samples are a prefix 0..n-1 and the summary and every block level
  /// account for exactly those samples.
  bool consistent() const {
    if (samples != max_step + 1 || summary_count != samples || pack_count != samples ||
        (samples > 0 && summary_last_step != max_step))
      return false;
    for (int64_t c : block_counts)
      if (c != samples)
        return false;
    return values_ok;
  }
};

/// Reads one series of run `run_id` in a single read transaction. `value_of` checks every value.
template <class F>
SeriesSnapshot snapshot_series(sql::Db& db, const std::string& run_id, const std::string& metric, F value_of) {
  SeriesSnapshot s;
  sql::Txn txn(db, sql::Txn::Kind::read);
  sql::Stmt ids = db.prepare("SELECT r.rid, k.id FROM runs r, metric_keys k WHERE r.id = ? AND k.name = ?");
  if (!ids.bind(1, run_id).bind(2, metric).step())
    return s;
  const int64_t rid = ids.col_int(0), mid = ids.col_int(1);
  sql::Stmt q = db.prepare("SELECT step, value FROM samples WHERE run = ? AND metric = ? ORDER BY step");
  q.bind(1, rid).bind(2, mid);
  while (q.step()) {
    ++s.samples;
    s.max_step = q.col_int(0);
    if (q.col_double(1) != value_of(s.max_step))
      s.values_ok = false;
  }
  sql::Stmt sum = db.prepare("SELECT count, last_step FROM metric_summary WHERE run = ? AND metric = ?");
  if (sum.bind(1, rid).bind(2, mid).step()) {
    s.summary_count = sum.col_int(0);
    s.summary_last_step = sum.col_int(1);
  }
  sql::Stmt pack = db.prepare("SELECT summary_pack FROM runs WHERE rid = ?");
  if (pack.bind(1, rid).step())
    for (const auto& [id, agg] : store_detail::unpack_summaries(pack.col_blob(0)))
      if (id == mid)
        s.pack_count = agg.count;
  sql::Stmt blk = db.prepare("SELECT level, sum(count) FROM sample_blocks WHERE run = ? AND metric = ? GROUP BY level");
  blk.bind(1, rid).bind(2, mid);
  while (blk.step())
    if (blk.col_int(0) >= 1 && blk.col_int(0) <= 5)
      s.block_counts[blk.col_int(0) - 1] = blk.col_int(1);
  return s;
}

}  // namespace lathe::test
