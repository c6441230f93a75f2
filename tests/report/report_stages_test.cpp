// Stage results of a single run: the dense baseline, the pruned model, the f32 model before INT8
// and the INT8 model side by side (accuracy, bytes, latency b1/b256, throughput, speedup over the
// stage's baseline, with units), from the metrics the stages log; a run without compression gets
// one "trained" row. The single-run report shows the table.
#include "widgets/report/report_stages.h"
#include "report_test_util.h"
#include "widgets/common/contention.h"
#include "widgets/report/report.h"

namespace lathe::report {
namespace {

std::string seed_compressed(const std::string& db, const std::vector<std::pair<std::string, double>>& extra = {}) {
  RunWriter w(db);
  RunInfo info;
  info.name = "prune-int8";
  info.config = {{"name", "prune-int8"}};
  const std::string id = w.begin_run(info);
  const std::vector<std::pair<std::string, double>> m = {{"dense/test_accuracy", 0.88},
                                                         {"model/dense_bytes", 2'000'000},
                                                         {"latency/dense/b1_ms", 0.5},
                                                         {"latency/dense/b256_ms", 40},
                                                         {"throughput/dense/b256_samples_per_s", 6400},
                                                         {"pruned/test_accuracy", 0.87},
                                                         {"prune/bytes_ratio", 0.5},
                                                         {"latency/pruned/b1_ms", 0.25},
                                                         {"latency/pruned/b256_ms", 20},
                                                         {"quant/f32_test_accuracy", 0.87},
                                                         {"model/f32_bytes", 2'000'000},
                                                         {"latency/f32/b1_ms", 0.5},
                                                         {"latency/f32/b256_ms", 40},
                                                         {"quant/test_accuracy", 0.865},
                                                         {"model/int8_bytes", 500'000},
                                                         {"latency/int8/b1_ms", 0.2},
                                                         {"latency/int8/b256_ms", 10},
                                                         {"throughput/int8/b256_samples_per_s", 25600},
                                                         {"test/accuracy", 0.865},
                                                         {"latency/int8/b1_spread_pct", 20},
                                                         {"latency/pruned/b1_others_cpu_share", 0.6}};
  for (const auto& [name, v] : m)
    w.sample(name, 10, 1, v);
  for (const auto& [name, v] : extra)
    w.sample(name, 10, 1, v);
  w.finish(RunStatus::finished);
  return id;
}

TEST(ReportStages, DenseVersusCompressedSideBySide) {
  test::ensure_qapp();
  test::TempDir dir;
  const std::string id = seed_compressed(dir.file("lathe.db"));
  Store store = Store::open(dir.file("lathe.db"));
  const ReportData data = collect_report_data(store, {id});
  const std::vector<StageRow> rows = stage_rows(data.runs[0]);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].model, "dense");
  EXPECT_EQ(rows[1].model, "pruned");
  EXPECT_EQ(rows[1].baseline, "dense");
  EXPECT_DOUBLE_EQ(*rows[1].bytes, 1'000'000);
  EXPECT_DOUBLE_EQ(*rows[1].speedup_b1, 2.0);
  EXPECT_DOUBLE_EQ(*rows[1].speedup_b256, 2.0);
  EXPECT_FALSE(rows[0].speedup_b1.has_value());
  EXPECT_EQ(rows[3].model, "INT8");
  EXPECT_EQ(rows[3].baseline, "f32");
  EXPECT_DOUBLE_EQ(*rows[3].accuracy, 0.865);
  EXPECT_DOUBLE_EQ(*rows[3].speedup_b1, 2.5);
  EXPECT_DOUBLE_EQ(*rows[3].speedup_b256, 4.0);
  EXPECT_DOUBLE_EQ(*rows[3].b256_samples_per_s, 25600);

  const std::string path = dir.file("run.html");
  write_report(store, {id}, Format::html, path);
  const std::string html = test::read_file(path);
  const size_t at = html.find("Stage results");
  ASSERT_NE(at, std::string::npos);
  const std::string table = html.substr(at, html.find("</table>", at) - at);
  for (const char* s : {">INT8 ", ">86.50 %<", ">488.28 KiB<", ">10 ms<", ">25,600 samples/s<", ">2.5x<", ">4x<",
                        ">976.56 KiB<", ">1.91 MiB<"})
    EXPECT_NE(table.find(s), std::string::npos) << s << " in\n" << table;
  // The spread of the INT8 b1 repetitions, and the pruned model's figures marked contended.
  EXPECT_NE(table.find(">0.2 ms <span class=\"muted\">&plusmn;10%</span><"), std::string::npos) << table;
  EXPECT_TRUE(rows[1].contended());
  EXPECT_FALSE(rows[3].contended());
  EXPECT_NE(html.find("contended: other processes used more than 20% of the CPUs"), std::string::npos);
}

TEST(ReportStages, SpeedupsBuiltOnContendedLatenciesAreMarked) {
  test::ensure_qapp();
  test::TempDir dir;
  // The pruned model was timed under contention (seed_compressed), and so was the f32 baseline of
  // the INT8 model at batch 256 (0.5 of the CPUs taken by others); the INT8 model itself was not.
  const std::string id = seed_compressed(dir.file("lathe.db"), {{"latency/f32/b256_others_cpu_share", 0.5},
                                                                {"latency/int8/b256_others_cpu_share", 0.05},
                                                                {"prune/speedup_b1", 2.0},
                                                                {"quant/speedup_b256", 4.0},
                                                                {"quant/speedup_b1", 2.5}});
  Store store = Store::open(dir.file("lathe.db"));
  const ReportData data = collect_report_data(store, {id});
  const std::vector<StageRow> rows = stage_rows(data.runs[0]);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_TRUE(rows[1].speedup_contended);   // its own latency
  EXPECT_FALSE(rows[3].contended());        // the INT8 latencies are clean...
  EXPECT_TRUE(rows[3].speedup_contended);   // ...but its baseline's were not
  EXPECT_FALSE(rows[0].speedup_contended);  // a baseline has no speedup
  const std::string path = dir.file("run.html");
  write_report(store, {id}, Format::html, path);
  const std::string html = test::read_file(path);
  const size_t at = html.find("Stage results");
  const std::string table = html.substr(at, html.find("</table>", at) - at);
  EXPECT_NE(table.find(">2x <span class=\"error\">&dagger;</span><"), std::string::npos) << table;
  EXPECT_NE(table.find(">4x <span class=\"error\">&dagger;</span><"), std::string::npos) << table;
  EXPECT_NE(html.find("while a latency this speedup is built on was timed"), std::string::npos);
  // The same test for the logged speedup metrics (Compare marks them with it).
  const auto& sums = data.runs[0].summaries;
  EXPECT_TRUE(widgets::speedup_contended(sums, "prune/speedup_b1"));     // pruned b1: 0.6
  EXPECT_TRUE(widgets::speedup_contended(sums, "quant/speedup_b256"));   // f32 b256: 0.5
  EXPECT_FALSE(widgets::speedup_contended(sums, "quant/speedup_b1"));    // neither b1 share recorded
  EXPECT_FALSE(widgets::speedup_contended(sums, "latency/int8/b1_ms"));  // not a speedup
}

TEST(ReportStages, AnUncompressedRunHasOneTrainedRow) {
  test::ensure_qapp();
  test::TempDir dir;
  RunWriter w(dir.file("lathe.db"));
  RunInfo info;
  info.name = "plain";
  const std::string id = w.begin_run(info);
  w.sample("test/accuracy", 5, 1, 0.9);
  w.sample("model/bytes", 5, 1, 4096);
  w.finish(RunStatus::finished);
  Store store = Store::open(dir.file("lathe.db"));
  const std::vector<StageRow> rows = stage_rows(collect_report_data(store, {id}).runs[0]);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].model, "trained");
  EXPECT_DOUBLE_EQ(*rows[0].accuracy, 0.9);
  EXPECT_DOUBLE_EQ(*rows[0].bytes, 4096);
  EXPECT_FALSE(rows[0].b1_ms.has_value());
}

}  // namespace
}  // namespace lathe::report
