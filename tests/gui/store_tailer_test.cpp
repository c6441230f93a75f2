// LiveFeed tails a run being written by a RunWriter in this process (another connection, as
// lathe-cli would be): the first batch holds what was committed, later batches only what is new,
// and a long series is first read downsampled with its extremes intact.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "gui_test_util.h"
#include "widgets/ui/store_tailer.h"

namespace lathe::ui {

TEST(GuiStoreTail, BatchesCarryOnlyNewSamples) {
  test::GuiTempDir dir;
  RunWriter writer(dir.db());
  RunInfo info;
  info.name = "tail";
  info.config = {{"train", {{"epochs", 2}}}};
  const std::string id = writer.begin_run(info);
  writer.event("started", {{"total_steps", 100}, {"price_usd_per_hour", 1.0}});
  for (int s = 1; s <= 30; ++s)
    writer.sample("train/loss", s, s * 10.0, 1.0 / s);
  writer.flush();

  LiveFeed feed(dir.qdb(), 50);
  std::map<std::string, std::vector<Point>> got;
  int batches = 0, resets = 0;
  bool sawStarted = false;
  QObject::connect(&feed, &LiveFeed::batchReady, [&](const TailBatchPtr& b) {
    ++batches;
    resets += b->reset;
    for (const auto& [m, pts] : b->series)
      got[m].insert(got[m].end(), pts.begin(), pts.end());
    for (const auto& e : b->events)
      sawStarted |= e.kind == "started";
  });
  feed.watch(QString::fromStdString(id));
  ASSERT_TRUE(test::wait_until([&]() { return got["train/loss"].size() >= 30; }, 5000));
  for (int s = 31; s <= 60; ++s)
    writer.sample("train/loss", s, s * 10.0, 1.0 / s);
  writer.flush();
  ASSERT_TRUE(test::wait_until([&]() { return got["train/loss"].size() >= 60; }, 5000));
  test::wait_until([]() { return false; }, 200);  // a few more polls: nothing may repeat
  ASSERT_EQ(got["train/loss"].size(), 60u);
  for (int i = 0; i < 60; ++i) {
    EXPECT_EQ(got["train/loss"][i].step, i + 1);
    EXPECT_DOUBLE_EQ(got["train/loss"][i].value, 1.0 / (i + 1));
  }
  EXPECT_EQ(resets, 1);
  EXPECT_GE(batches, 2);
  EXPECT_TRUE(sawStarted);
  writer.finish(RunStatus::finished);
}

TEST(GuiStoreTail, LongSeriesIsDownsampledKeepingExtremes) {
  test::GuiTempDir dir;
  std::vector<double> values(50'000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = std::sin(i * 0.001);
  values[12'345] = 42.0;  // a spike that must survive
  values[33'333] = -17.0;
  const std::string id = test::write_run(dir.db(), "long", nlohmann::json::object(), {{"train/loss", values}});
  LiveFeed feed(dir.qdb(), 50, /*rawLimit=*/10'000, /*buckets=*/1000);
  std::vector<Point> got;
  QObject::connect(&feed, &LiveFeed::batchReady, [&](const TailBatchPtr& b) {
    for (const auto& [m, pts] : b->series)
      got.insert(got.end(), pts.begin(), pts.end());
  });
  feed.watch(QString::fromStdString(id));
  ASSERT_TRUE(test::wait_until([&]() { return !got.empty(); }, 5000));
  EXPECT_LT(got.size(), 5000u);
  double mx = -1e9, mn = 1e9;
  for (const Point& p : got) {
    mx = std::max(mx, p.value);
    mn = std::min(mn, p.value);
  }
  EXPECT_DOUBLE_EQ(mx, 42.0);
  EXPECT_DOUBLE_EQ(mn, -17.0);
  EXPECT_EQ(got.back().step, 50'000);
}

TEST(GuiStoreTail, NewRunsAreAnnounced) {
  test::GuiTempDir dir;
  LiveFeed feed(dir.qdb(), 50);
  qint64 total = -1;
  QString running;
  QObject::connect(&feed, &LiveFeed::runsChanged, [&](qint64 t, const QString& r) {
    total = t;
    running = r;
  });
  ASSERT_TRUE(test::wait_until([&]() { return total == 0; }, 5000));
  RunWriter writer(dir.db());
  RunInfo info;
  info.name = "from-a-terminal";
  const std::string id = writer.begin_run(info);
  ASSERT_TRUE(test::wait_until([&]() { return total == 1; }, 5000));
  EXPECT_EQ(running.toStdString(), id);
  writer.finish(RunStatus::finished);
  ASSERT_TRUE(test::wait_until([&]() { return running.isEmpty(); }, 5000));
}

}  // namespace lathe::ui
