// Downsampling keeps every min and max: each bucket's count, first, last, min and max are checked
// against a brute-force pass over the raw series, for the raw path and every block level, dense and
// sparse steps, spikes, NaNs, sub-ranges, data written in many small (and out-of-order) batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/core/error.h"
#include "engine/store/aggregate.h"
#include "engine/store/run_writer.h"
#include "engine/store/store.h"
#include "store_test_util.h"

namespace lathe {
namespace {

using test::StoreDir;

/// A random walk with rare large spikes both ways (what a TensorBoard-style sampler drops).
std::vector<Point> spiky_series(int64_t n, int64_t stride, int64_t first_step, uint32_t seed, bool with_nans) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> step_noise(0.0, 0.01);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<Point> pts;
  double v = 1.0;
  for (int64_t i = 0; i < n; ++i) {
    v += step_noise(rng);
    double value = v;
    const double r = u(rng);
    if (r < 0.001)
      value += 50.0 * u(rng);
    if (r > 0.999)
      value -= 50.0 * u(rng);
    if (with_nans && r > 0.4985 && r < 0.5015)
      value = std::nan("");
    const int64_t step = first_step + i * stride;
    pts.push_back({step, static_cast<double>(step) * 0.5, value});
  }
  return pts;
}

void write(const std::string& db, const std::string& id, const std::vector<Point>& pts, size_t batch_rows = 4096,
           bool shuffle_chunks = false) {
  WriterOptions o;
  o.batch_rows = batch_rows;
  RunWriter w(db, o);
  RunInfo info;
  info.id = id;
  info.name = id;
  w.begin_run(info);
  std::vector<Point> order = pts;
  if (shuffle_chunks) {  // out of order across batches (blocks are then merged in the database)
    std::mt19937 rng(7);
    std::shuffle(order.begin(), order.end(), rng);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    w.sample("m", order[i].step, order[i].wall_ms, order[i].value);
    if (batch_rows < 4096 && i % batch_rows == batch_rows - 1)
      w.flush();
  }
  w.finish(RunStatus::finished);
}

/// Checks a downsample against the raw points: ordered disjoint buckets within the asked range,
/// no more than asked, counts adding up, and each bucket's aggregates exact.
void check(const DownsampledSeries& d, const std::vector<Point>& pts, int buckets, int64_t lo, int64_t hi,
           const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_FALSE(d.buckets.empty());
  EXPECT_LE(static_cast<int>(d.buckets.size()), buckets);
  int64_t total = 0, prev_hi = std::numeric_limits<int64_t>::min();
  for (const Bucket& b : d.buckets) {
    ASSERT_LE(b.step_lo, b.step_hi);
    ASSERT_GT(b.step_lo, prev_hi);
    EXPECT_LE(b.step_hi - b.step_lo + 1, d.bucket_width);
    prev_hi = b.step_hi;
    // Each bucket summarises exactly the samples of its own step range.
    const test::Extremes e = test::brute_extremes(pts, b.step_lo, b.step_hi);
    EXPECT_EQ(b.count, e.count) << "bucket [" << b.step_lo << ", " << b.step_hi << "]";
    total += b.count;
    if (e.any) {
      EXPECT_EQ(b.min.step, e.min.step);
      EXPECT_EQ(b.min.value, e.min.value);
      EXPECT_EQ(b.min.wall_ms, e.min.wall_ms);
      EXPECT_EQ(b.max.step, e.max.step);
      EXPECT_EQ(b.max.value, e.max.value);
    } else {
      EXPECT_TRUE(std::isnan(b.min.value) && std::isnan(b.max.value));
    }
    EXPECT_EQ(b.first.step, e.first.step);
    EXPECT_EQ(b.last.step, e.last.step);
    EXPECT_EQ(b.last.wall_ms, e.last.wall_ms);
    if (::testing::Test::HasFailure())
      return;  // one broken bucket is enough to read
  }
  // Every sample of the asked range is in some bucket.
  const test::Extremes all = test::brute_extremes(pts, lo, hi);
  EXPECT_GE(total, all.count);
  // The overall min and max of the range are among the points a chart draws.
  const std::vector<Point> drawn = d.points();
  for (size_t i = 1; i < drawn.size(); ++i)
    ASSERT_LT(drawn[i - 1].step, drawn[i].step);
  const auto has = [&](const Point& p) {
    return std::any_of(drawn.begin(), drawn.end(),
                       [&](const Point& q) { return q.step == p.step && q.value == p.value; });
  };
  if (all.any) {
    EXPECT_TRUE(has(all.min)) << "global min at step " << all.min.step;
    EXPECT_TRUE(has(all.max)) << "global max at step " << all.max.step;
  }
}

TEST(Downsample, EveryBucketMatchesBruteForceAtEveryLevel) {
  StoreDir dir;
  const std::vector<Point> pts = spiky_series(200'000, 1, 0, 1, false);
  write(dir.db(), "dense", pts);
  Store s = Store::open(dir.db());
  // 2000 buckets: width 100 -> level 1 (16); 50 -> level 1; 5 -> raw; 1: width 200000 -> level 4.
  for (int n : {50'000, 2000, 700, 100, 10, 1}) {
    const DownsampledSeries d = s.downsample("dense", "m", n);
    check(d, pts, n, 0, 199'999, "buckets=" + std::to_string(n));
  }
  const int64_t blocks_l1 = s.db().query_int("SELECT sum(count) FROM sample_blocks WHERE level = 1").value_or(0);
  const int64_t blocks_l5 = s.db().query_int("SELECT sum(count) FROM sample_blocks WHERE level = 5").value_or(0);
  EXPECT_EQ(blocks_l1, 200'000);  // the pyramid holds every sample once per level
  EXPECT_EQ(blocks_l5, 200'000);
}

TEST(Downsample, SparseStepsOffsetsAndNans) {
  StoreDir dir;
  const std::vector<Point> pts = spiky_series(30'000, 7, 1'000'003, 2, true);
  write(dir.db(), "sparse", pts);
  Store s = Store::open(dir.db());
  const int64_t lo = pts.front().step, hi = pts.back().step;
  for (int n : {3000, 333, 17})
    check(s.downsample("sparse", "m", n), pts, n, lo, hi, "buckets=" + std::to_string(n));
}

TEST(Downsample, SmallBatchesAndOutOfOrderWritesMergeExactly) {
  StoreDir dir;
  const std::vector<Point> pts = spiky_series(20'000, 3, 0, 3, true);
  write(dir.db(), "batched", pts, 97, false);
  write(dir.db(), "shuffled", pts, 4096, true);
  Store s = Store::open(dir.db());
  for (const char* id : {"batched", "shuffled"}) {
    check(s.downsample(id, "m", 200), pts, 200, 0, pts.back().step, id);
    const auto sum = s.summary(id, "m");
    const test::Extremes e = test::brute_extremes(pts, 0, pts.back().step);
    EXPECT_EQ(sum->count, 20'000);
    EXPECT_EQ(sum->min_step, e.min.step);
    EXPECT_EQ(sum->max_step, e.max.step);
    EXPECT_EQ(sum->last_step, pts.back().step);
  }
}

TEST(Downsample, SubRange) {
  StoreDir dir;
  const std::vector<Point> pts = spiky_series(100'000, 1, 0, 4, false);
  write(dir.db(), "r", pts);
  Store s = Store::open(dir.db());
  check(s.downsample("r", "m", 100, 12'345, 23'456), pts, 100, 12'345, 23'456, "block path");
  const DownsampledSeries raw = s.downsample("r", "m", 1000, 50'001, 52'000);  // width 2: raw samples
  check(raw, pts, 1000, 50'001, 52'000, "raw path");
  EXPECT_EQ(raw.buckets.front().step_lo, 50'001);  // the raw path keeps the exact range
  EXPECT_EQ(raw.buckets.back().step_hi, 52'000);
  EXPECT_TRUE(s.downsample("r", "m", 10, 200'000, 300'000).buckets.empty());  // past the end
  EXPECT_TRUE(s.downsample("r", "nope", 10).buckets.empty());
  EXPECT_THROW(s.downsample("r", "m", 0), DataError);
}

TEST(Downsample, PointsDrawFirstMinMaxLastWithoutRepeats) {
  DownsampledSeries d;
  Bucket b;
  b.first = {0, 0, 1.0};
  b.min = {0, 0, 1.0};  // the first sample is also the minimum
  b.max = {5, 0, 9.0};
  b.last = {9, 0, 2.0};
  Bucket nan_only;
  nan_only.first = {10, 0, std::nan("")};
  nan_only.last = {12, 0, std::nan("")};
  nan_only.min = nan_only.max = {10, 0, std::nan("")};
  d.buckets = {b, nan_only};
  const std::vector<Point> p = d.points();
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].step, 0);
  EXPECT_EQ(p[1].step, 5);
  EXPECT_EQ(p[2].step, 9);
  EXPECT_EQ(p[3].step, 10);
  EXPECT_EQ(p[4].step, 12);
}

TEST(Aggregate, MergeEqualsAddingEverything) {
  const std::vector<Point> pts = spiky_series(1000, 1, -500, 5, true);  // negative steps too
  store_detail::Agg whole, a, b;
  for (size_t i = 0; i < pts.size(); ++i) {
    whole.add(pts[i]);
    (i % 3 == 0 ? a : b).add(pts[i]);
  }
  a.merge(b);
  EXPECT_EQ(a.count, whole.count);
  EXPECT_EQ(a.first.step, whole.first.step);
  EXPECT_EQ(a.last.step, whole.last.step);
  EXPECT_EQ(a.min.step, whole.min.step);
  EXPECT_EQ(a.max.step, whole.max.step);
  EXPECT_EQ(store_detail::block_of(-1, 1), -1);  // floor, not truncation
  EXPECT_EQ(store_detail::block_of(-16, 1), -1);
  EXPECT_EQ(store_detail::block_of(-17, 1), -2);
  EXPECT_EQ(store_detail::block_of(255, 2), 0);
  EXPECT_EQ(store_detail::block_of(256, 2), 1);
}

}  // namespace
}  // namespace lathe
