// What the report says about how a run was run: a resumed run's segments (how each ended, the
// step it reached or a lower bound for a killed one) and its training-phase means over them; a
// simulated spot run's figures with the on-demand cost labelled a projection; the ranks, ZeRO-1,
// precision and the MFU peak (value, data type, per rank, how) in the run facts; a model file
// rewritten at every stop listed once as its last write; checkpoint events and files folded;
// constant metrics not charted; the glance table's $ rows in order and the training means beside
// the last window's samples/s and MFU.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "report_test_util.h"
#include "widgets/report/report_data.h"
#include "widgets/report/report_history.h"
#include "widgets/report/report_html.h"

namespace lathe::report {
namespace {

nlohmann::json end_metrics(double seconds, double sps, double mfu) {
  return {{"train/seconds", seconds}, {"train/samples_per_s_mean", sps}, {"device/mfu_mean", mfu}};
}

/// A run killed once (its writer gone: a status event only) and resumed, then interrupted by a
/// spot notice and resumed again; model.safetensors written at both stops and at the end, five
/// checkpoints (their files recorded as artifacts).
std::string seed_resumed(const std::string& db, const std::string& dir) {
  RunWriter w(db);
  RunInfo info;
  info.name = "resumed";
  info.config = {{"train", {{"precision", "fp32"}}}, {"cost", {{"pricing", "spot"}}}};
  const std::string id = w.begin_run(info);
  w.event("started", {{"threads", 1},
                      {"device", "Xeon"},
                      {"instance", "g4dn.xlarge"},
                      {"price_usd_per_hour", 0.16},
                      {"peak_flops_per_s", 2.027e11},
                      {"peak_flops_dtype", "f32"},
                      {"peak_flops_how", "measured: oneDNN SGEMM"}});
  for (int step = 10; step <= 50; step += 10) {
    w.event("checkpoint",
            {{"step", step}, {"trigger", "steps"}, {"write_s", 0.05}, {"path", dir + "/ckpt/" + std::to_string(step)}});
  }
  w.event("status", {{"from", "running"}, {"to", "interrupted"}, {"reason", "writer process 7 on vm is gone"}});
  w.event("resumed", {{"from_step", 30}, {"checkpoint", dir + "/ckpt/30"}});
  w.event("spot/notice", {{"step", 40}});
  w.event("interrupted", {{"steps", 40}, {"elapsed_s", 1.0}, {"metrics", end_metrics(1.0, 100, 0.2)}});
  w.event("resumed", {{"from_step", 40}, {"checkpoint", dir + "/ckpt/40"}});
  w.event("finished", {{"steps", 60}, {"elapsed_s", 3.0}, {"metrics", end_metrics(3.0, 200, 0.4)}});
  // The writer hashes each file when it records it: flush after each write so that each record
  // holds the content it had then.
  const auto write_file = [&](const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
  };
  for (const char* content : {"first write", "second write", "last write"}) {
    write_file(dir + "/model.safetensors", content);
    w.artifact("model", dir + "/model.safetensors");
    w.flush();
  }
  for (int step = 10; step <= 50; step += 10) {
    write_file(dir + "/ckpt/" + std::to_string(step) + "/t.safetensors", "checkpoint " + std::to_string(step));
    w.artifact("checkpoint", dir + "/ckpt/" + std::to_string(step) + "/t.safetensors");
  }
  // The supervisor's figures, written after the run ended.
  for (const auto& [metric, v] : std::vector<std::pair<std::string, double>>{{"spot/interruptions", 1},
                                                                             {"spot/kills", 0},
                                                                             {"spot/restarts", 1},
                                                                             {"spot/steps_redone", 0},
                                                                             {"spot/seconds_redone", 0},
                                                                             {"spot/restart_wait_s", 5},
                                                                             {"spot/restart_setup_s", 2},
                                                                             {"spot/wall_s", 20},
                                                                             {"cost/usd", 0.001653},
                                                                             {"cost/usd_on_demand", 0.001649}})
    w.sample(metric, 60, 1, v);
  w.sample("train/samples_per_s", 10, 1, 50);
  w.sample("train/samples_per_s", 60, 1, 90);
  w.sample("device/mfu", 10, 1, 0.1);
  w.sample("device/mfu", 60, 1, 0.3);
  w.sample("mem/optimizer_bytes", 10, 1, 4096);  // constant: no chart
  w.sample("mem/optimizer_bytes", 60, 1, 4096);
  w.event("spot/summary", {{"interruptions", 1}, {"on_demand_equivalent_s", 13.0}, {"wall_s", 20.0}});
  w.finish(RunStatus::finished);
  return id;
}

TEST(ReportHistory, AResumedRunIsItsSegmentsWithMeansOverThem) {
  test::ensure_qapp();
  test::TempDir dir;
  const std::string id = seed_resumed(dir.file("lathe.db"), dir.path().string());
  Store store = Store::open(dir.file("lathe.db"));
  const ReportData data = collect_report_data(store, {id});
  const RunHistory h = run_history(data.runs[0]);
  ASSERT_EQ(h.segments.size(), 3u);
  EXPECT_EQ(h.segments[0].ended, "interrupted: writer process 7 on vm is gone");
  EXPECT_FALSE(h.segments[0].reached_step);  // killed: its last step is not in the store
  EXPECT_EQ(h.segments[1].from_step, 30);
  EXPECT_EQ(h.segments[1].ended, "interrupted: spot notice");
  EXPECT_EQ(*h.segments[1].reached_step, 40);
  EXPECT_EQ(h.segments[2].ended, "finished");
  // Over the two segments that logged means: (100 x 1 + 200 x 3) / 4 samples/s, MFU (0.2 + 1.2) / 4.
  EXPECT_EQ(h.with_means, 2);
  EXPECT_DOUBLE_EQ(*h.samples_per_s_mean, 175.0);
  EXPECT_DOUBLE_EQ(*h.mfu_mean, 0.35);

  const std::string html = build_report_html(data, {}, HtmlFlavor::print);
  EXPECT_NE(html.find("Run history"), std::string::npos);
  EXPECT_NE(html.find("&ge; 30"), std::string::npos);  // the killed segment reached at least the next one's checkpoint
  EXPECT_NE(html.find("2 time(s) from a checkpoint"), std::string::npos);
  EXPECT_NE(html.find("175 /s, MFU 35.00%"), std::string::npos);
  EXPECT_NE(html.find("2 of 3 segments"), std::string::npos);
  EXPECT_NE(html.find("samples_per_s (last window; mean 175 /s)"), std::string::npos);
  EXPECT_NE(html.find("g4dn.xlarge (spot $0.1600/h)"), std::string::npos);
}

TEST(ReportHistory, ASpotRunSaysWhatWasMeasuredAndWhatIsProjected) {
  test::ensure_qapp();
  test::TempDir dir;
  const std::string id = seed_resumed(dir.file("lathe.db"), dir.path().string());
  Store store = Store::open(dir.file("lathe.db"));
  const ReportData data = collect_report_data(store, {id});
  const std::optional<SpotFigures> spot = spot_figures(data.runs[0]);
  ASSERT_TRUE(spot);
  EXPECT_DOUBLE_EQ(spot->on_demand_equivalent_s, 13.0);
  EXPECT_DOUBLE_EQ(*spot->cost_on_demand_usd, 0.001649);
  const std::string html = build_report_html(data, {}, HtmlFlavor::print);
  EXPECT_NE(html.find("Spot (simulated)"), std::string::npos);
  EXPECT_NE(html.find("Cost as run: g4dn.xlarge's spot price x the wall time"), std::string::npos)
      << html.substr(html.find("Cost as run"), 300);
  EXPECT_NE(html.find("$0.001653"), std::string::npos);
  EXPECT_NE(html.find("Projected: the same work on-demand"), std::string::npos);
  EXPECT_NE(html.find("$0.001649"), std::string::npos);
  EXPECT_NE(html.find("+0.2%"), std::string::npos);
  EXPECT_NE(html.find("2.0 s"), std::string::npos);  // set-up after restarts
}

TEST(ReportHistory, ArtifactsAndCheckpointsAreListedOnceAsTheyAreNow) {
  test::ensure_qapp();
  test::TempDir dir;
  const std::string id = seed_resumed(dir.file("lathe.db"), dir.path().string());
  Store store = Store::open(dir.file("lathe.db"));
  const ReportData data = collect_report_data(store, {id});
  const std::vector<ArtifactRecord>& stored = data.runs[0].artifacts;
  ASSERT_EQ(stored.size(), 8u);  // 3 model writes, 5 checkpoints
  const std::vector<ArtifactRow> rows = artifact_rows(stored);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].record.kind, "model");
  EXPECT_EQ(rows[0].record.sha256, stored[2].sha256);  // the file holds the last write
  EXPECT_NE(stored[0].sha256, stored[2].sha256);
  EXPECT_EQ(rows[0].note, "written 3 times: the last write");
  EXPECT_EQ(rows[1].record.sha256, stored[7].sha256);  // the newest checkpoint
  EXPECT_NE(rows[1].note.find("the newest of 5 checkpoints"), std::string::npos);

  const std::string html = build_report_html(data, {}, HtmlFlavor::print);
  EXPECT_NE(html.find(stored[2].sha256), std::string::npos);
  EXPECT_EQ(html.find(stored[0].sha256), std::string::npos);  // an overwritten file's sha256 is nowhere
  EXPECT_EQ(html.find(stored[1].sha256), std::string::npos);
  EXPECT_EQ(html.find(stored[3].sha256), std::string::npos);                         // nor an old checkpoint's
  EXPECT_NE(html.find("weights (model), the last of 3 writes"), std::string::npos);  // provenance
  // The five checkpoint events are one row; their files' artifact events are not listed.
  EXPECT_NE(html.find("checkpoint &times;5"), std::string::npos);
  EXPECT_NE(html.find("steps 10 to 50"), std::string::npos);
  EXPECT_EQ(html.find("10/t.safetensors"), std::string::npos);
  // A constant metric is in the summary table but gets no chart.
  EXPECT_TRUE(std::find(data.charted.begin(), data.charted.end(), "mem/optimizer_bytes") == data.charted.end());
  EXPECT_TRUE(std::find(data.charted.begin(), data.charted.end(), "device/mfu") != data.charted.end());
}

/// A 2-rank ZeRO-1 run and a bf16 run, as their started and precision events and metrics say.
// Priced at an instance whose GPUs the run did not train on: the Cost row and the comparison's
// Runs table say the dollars are a projection, and why (the started event's cost_projection).
TEST(ReportHistory, ACostPricedAtAnotherDeviceIsMarkedProjected) {
  test::ensure_qapp();
  test::TempDir dir;
  RunWriter w(dir.file("lathe.db"));
  RunInfo cpu;
  cpu.name = "cpu-priced-as-t4";
  const std::string id = w.begin_run(cpu);
  w.event("started", {{"instance", "g4dn.xlarge"},
                      {"price_usd_per_hour", 0.526},
                      {"cost_projection", "timed on Xeon (CPU), priced at the g4dn.xlarge rate"}});
  w.sample("cost/usd", 1, 1, 0.01);
  w.finish(RunStatus::finished);
  RunWriter w2(dir.file("lathe.db"));
  RunInfo own;
  own.name = "measured";
  const std::string own_id = w2.begin_run(own);
  w2.event("started", {{"instance", "g4dn.xlarge"}, {"price_usd_per_hour", 0.526}, {"cost_projection", ""}});
  w2.sample("cost/usd", 1, 1, 0.02);
  w2.finish(RunStatus::finished);

  Store store = Store::open(dir.file("lathe.db"));
  const std::string html = build_report_html(collect_report_data(store, {id}), {}, HtmlFlavor::print);
  EXPECT_NE(html.find("<b>Projected</b>: timed on Xeon (CPU), priced at the g4dn.xlarge rate"), std::string::npos)
      << html.substr(html.find("Cost"), 400);
  const std::string measured = build_report_html(collect_report_data(store, {own_id}), {}, HtmlFlavor::print);
  EXPECT_EQ(measured.find("<b>Projected</b>"), std::string::npos);  // (the store's path has the test's name)
  const std::string cmp = build_report_html(collect_report_data(store, {id, own_id}), {}, HtmlFlavor::print);
  EXPECT_NE(cmp.find(" (projected)"), std::string::npos);  // the Runs table's Cost cell
}

// A spot interruption's events (notice, emergency checkpoint, model save, interrupted, two status
// changes, resumed, the phase that continues) are one Events row; an evaluation between them keeps
// its own row, and the events before and after are untouched.
TEST(ReportHistory, AnInterruptionIsOneEventsRow) {
  test::ensure_qapp();
  test::TempDir dir;
  RunWriter w(dir.file("lathe.db"));
  RunInfo info;
  info.name = "spot";
  const std::string id = w.begin_run(info);
  w.event("started", {{"backend", "cpu"}});
  w.event("phase", {{"phase", "train"}, {"first_step", 0}});
  w.event("checkpoint", {{"step", 250}, {"write_s", 0.02}, {"path", "ckpt/step-250"}});
  w.event("spot/notice", {{"step", 299}, {"text", "spot notice seen by the training loop"}});
  w.event("checkpoint", {{"step", 299}, {"write_s", 0.026}, {"path", "ckpt/step-299"}});
  w.event("artifact", {{"kind", "checkpoint"}, {"path", "ckpt/step-299/tensors.safetensors"}});
  w.event("spot/checkpoint", {{"reason", "spot_notice"}, {"step", 299}, {"write_s", 0.026}});
  w.event("epoch", {{"epoch", 2}, {"step", 300}, {"test_accuracy", 0.8125}});
  w.event("artifact", {{"kind", "model"}, {"path", "model.safetensors"}});
  w.event("interrupted", {{"elapsed_s", 0.71}});
  w.event("status", {{"from", "running"}, {"to", "interrupted"}});
  w.event("status", {{"from", "interrupted"}, {"to", "running"}, {"resumed", true}});
  w.event("resumed", {{"from_step", 299}, {"checkpoint", "ckpt/step-299"}});
  w.event("phase", {{"phase", "train"}, {"first_step", 0}, {"start", {{"epoch", 1}}}});
  w.event("checkpoint", {{"step", 350}, {"write_s", 0.02}, {"path", "ckpt/step-350"}});
  w.event("finished", {{"elapsed_s", 1.07}});
  w.finish(RunStatus::finished);

  Store store = Store::open(dir.file("lathe.db"));
  const std::string html = build_report_html(collect_report_data(store, {id}), {}, HtmlFlavor::print);
  const size_t events = html.find("<h2>Events</h2>");
  ASSERT_NE(events, std::string::npos);
  const std::string table = html.substr(events, html.find("<h2>", events + 4) - events);
  const auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = table.find(what); at != std::string::npos; at = table.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count(">interruption<"), 1u) << table;
  EXPECT_NE(table.find("spot notice at step 299, checkpoint at step 299 written in 0.026 s, interrupted after"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("resumed from step 299"), std::string::npos) << table;
  for (const char* folded : {">spot/notice<", ">spot/checkpoint<", ">resumed<", ">interrupted<"})
    EXPECT_EQ(count(folded), 0u) << folded << table;
  EXPECT_EQ(count(">status<"), 2u) << table;  // the run's start and end, not the interruption's two
  EXPECT_EQ(count(">epoch<"), 1u) << table;       // an evaluation keeps its row
  EXPECT_EQ(count(">phase<"), 1u) << table;       // the first; the one after the resume is folded
  EXPECT_EQ(count(">checkpoint<"), 2u) << table;  // step 250, and step 350 after the resume
  EXPECT_EQ(count(">finished<"), 1u) << table;
}

TEST(ReportHistory, TheFactsSayRanksPrecisionAndWhatMfuIsOver) {
  test::ensure_qapp();
  test::TempDir dir;
  RunWriter w(dir.file("lathe.db"));
  RunInfo dp;
  dp.name = "dp2";
  dp.backend = "cpu";
  dp.config = {{"compute", {{"devices", 2}, {"shard_optimizer", true}}}, {"train", {{"precision", "fp32"}}}};
  const std::string dp_id = w.begin_run(dp);
  w.event("started", {{"threads", 1},
                      {"world_size", 2},
                      {"peak_flops_per_s", 2.027e11},
                      {"peak_flops_dtype", "f32"},
                      {"peak_flops_how", "measured: oneDNN SGEMM 1536^3 f32 on 1 thread(s)"}});
  w.event("note", {{"kind", "mfu_peak_raised"}, {"peak_flops_per_s", 2.027e11}, {"achieved_flops_per_s", 2.5e11}});
  w.sample("dist/world_size", 1, 1, 2);
  w.sample("device/util", 1, 1, 0.5);
  w.sample("device/mfu", 1, 1, 0.3);
  w.sample("cost/usd", 1, 1, 0.5);
  w.sample("test/accuracy", 1, 1, 0.8);
  w.finish(RunStatus::finished);
  RunWriter w2(dir.file("lathe.db"));
  RunInfo bf;
  bf.name = "bf16";
  bf.config = {{"train", {{"precision", "bf16"}}}};
  const std::string bf_id = w2.begin_run(bf);
  w2.event("started", {{"threads", 2}, {"peak_flops_per_s", 6.7e11}, {"peak_flops_dtype", "bf16"}});
  w2.event("precision", {{"precision", "bf16"}, {"linear", "native"}, {"note", "native bf16 kernels on Xeon"}});
  w2.sample("cost/usd", 1, 1, 0.25);
  w2.sample("device/mfu", 1, 1, 0.2);
  w2.sample("test/accuracy", 1, 1, 0.7);
  w2.finish(RunStatus::finished);

  Store store = Store::open(dir.file("lathe.db"));
  const std::string dp_html = build_report_html(collect_report_data(store, {dp_id}), {}, HtmlFlavor::print);
  EXPECT_NE(dp_html.find("2 data-parallel ranks x 1 thread, optimizer state sharded (ZeRO-1)"), std::string::npos)
      << dp_html.substr(dp_html.find("Backend"), 400);
  EXPECT_NE(dp_html.find("202.7 GFLOP/s f32 per rank (measured: oneDNN SGEMM"), std::string::npos);
  EXPECT_NE(dp_html.find("raised to 250.0 GFLOP/s"), std::string::npos);
  // device/util on a CPU is a share of the whole machine, which its name does not say.
  EXPECT_NE(dp_html.find("device/util on a CPU: this process's CPU time over all the machine"), std::string::npos);
  const std::string bf_html = build_report_html(collect_report_data(store, {bf_id}), {}, HtmlFlavor::print);
  EXPECT_NE(bf_html.find("bf16: native bf16 kernels on Xeon"), std::string::npos);
  EXPECT_NE(bf_html.find("670.0 GFLOP/s bf16"), std::string::npos);
  EXPECT_NE(bf_html.find("2 threads"), std::string::npos);
  EXPECT_EQ(bf_html.find("Run history"), std::string::npos);  // one segment: no history section

  // In a comparison the Runs table says the ranks, and the glance table keeps $ per run before $ per
  // accuracy point, ahead of the dist/* rows.
  const std::string cmp = build_report_html(collect_report_data(store, {dp_id, bf_id}), {}, HtmlFlavor::print);
  EXPECT_NE(cmp.find("2 data-parallel ranks"), std::string::npos);
  // An f32 peak's MFU beside a bf16 peak's: the glance table says they are not one scale.
  EXPECT_NE(cmp.find("of different data types (dp2: f32, bf16: bf16): not comparable"), std::string::npos);
  const size_t per_run = cmp.find(">cost/usd_per_run<"), per_point = cmp.find(">cost/usd_per_accuracy_point<"),
               world = cmp.find(">dist/world_size<");
  ASSERT_NE(per_run, std::string::npos);
  ASSERT_NE(per_point, std::string::npos);
  ASSERT_NE(world, std::string::npos);
  EXPECT_LT(per_run, per_point);
  EXPECT_LT(per_point, world);
}

// A GPU run's peak is its device's datasheet figure for the run's data type, in TFLOP/s; a GPU the
// datasheet table lacks (and an unpriced instance) has none, and the report says why there is no MFU.
TEST(ReportHistory, AGpuRunsMfuPeakIsItsDatasheetsForItsDataType) {
  test::ensure_qapp();
  test::TempDir dir;
  RunWriter w(dir.file("lathe.db"));
  RunInfo gpu;
  gpu.name = "h200-bf16";
  gpu.backend = "cuda";
  gpu.config = {{"train", {{"precision", "bf16"}}}};
  const std::string id = w.begin_run(gpu);
  w.event("started", {{"device", "NVIDIA H200"},
                      {"peak_flops_per_s", 989.5e12},
                      {"peak_flops_dtype", "bf16"},
                      {"peak_flops_how",
                       "datasheet (NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column) for NVIDIA H200 SXM 141GB: "
                       "bf16 dense 989.5 TFLOP/s"}});
  w.sample("device/mfu", 1, 1, 0.01);
  w.finish(RunStatus::finished);
  RunWriter w2(dir.file("lathe.db"));
  RunInfo nvl;
  nvl.name = "unknown-gpu";
  nvl.backend = "cuda";
  const std::string nvl_id = w2.begin_run(nvl);
  w2.event("started", {{"device", "NVIDIA H200 NVL"},
                       {"peak_flops_per_s", 0},
                       {"peak_flops_dtype", "f32"},
                       {"peak_flops_how", "unknown: the device \"NVIDIA H200 NVL\" is not in device_peaks.json and "
                                          "cost.instance local has no fp32 peak; device/mfu not reported"}});
  w2.finish(RunStatus::finished);

  Store store = Store::open(dir.file("lathe.db"));
  const std::string html = build_report_html(collect_report_data(store, {id}), {}, HtmlFlavor::print);
  EXPECT_NE(html.find("989.5 TFLOP/s bf16 (datasheet (NVIDIA H200 Tensor Core GPU datasheet"), std::string::npos)
      << html.substr(html.find("MFU peak"), 400);
  const std::string none = build_report_html(collect_report_data(store, {nvl_id}), {}, HtmlFlavor::print);
  EXPECT_NE(none.find("none, unknown: the device &quot;NVIDIA H200 NVL&quot; is not in"), std::string::npos)
      << none.substr(none.find("MFU peak"), 400);
}

// A data-parallel run's per-rank series share one chart per figure, a line per rank in rank order
// (rank 10 after rank 2), instead of a chart per rank and figure.
TEST(ReportCharts, EveryRanksSeriesOfAFigureShareOneChart) {
  const std::vector<ChartGroup> groups =
      chart_groups({"train/loss", "dist/rank0/util", "dist/rank10/util", "dist/rank2/util", "dist/rank1/util",
                    "dist/rank0/samples_per_s", "dist/rankx/odd", "dist/comm_s"});
  ASSERT_EQ(groups.size(), 5u);
  EXPECT_EQ(groups[0].title, "train/loss");
  EXPECT_EQ(groups[1].title, "dist/rank*/util");
  EXPECT_EQ(groups[1].metrics,
            (std::vector<std::string>{"dist/rank0/util", "dist/rank1/util", "dist/rank2/util", "dist/rank10/util"}));
  EXPECT_EQ(groups[1].parts, (std::vector<std::string>{"rank 0", "rank 1", "rank 2", "rank 10"}));
  EXPECT_EQ(groups[2].title, "dist/rank*/samples_per_s");
  EXPECT_EQ(groups[3].title, "dist/rankx/odd");  // not a rank number: a chart of its own
  EXPECT_EQ(groups[4].title, "dist/comm_s");

  test::ensure_qapp();
  test::TempDir dir;
  RunWriter w(dir.file("lathe.db"));
  RunInfo info;
  info.name = "dp2";
  const std::string id = w.begin_run(info);
  for (int step = 1; step <= 3; ++step) {
    w.sample("dist/rank0/samples_per_s", step, step, 100.0 * step);
    w.sample("dist/rank1/samples_per_s", step, step, 90.0 * step);
  }
  w.finish(RunStatus::finished);
  Store store = Store::open(dir.file("lathe.db"));
  const ReportData data = collect_report_data(store, {id});
  const std::vector<ChartImage> charts = render_report_charts(data, HtmlFlavor::standalone);
  ASSERT_EQ(charts.size(), 1u);
  EXPECT_EQ(charts[0].metric, "dist/rank*/samples_per_s");
  EXPECT_FALSE(charts[0].png.isEmpty());
}

// A spot run whose notices were too short for a checkpoint: several segments resume from the same
// one; the supervisor's interruptions, in order, say which segments were killed and how far each got.
TEST(ReportHistory, KilledSegmentsResumingFromOneCheckpointAreEachMatched) {
  const auto ev = [](const std::string& kind, nlohmann::json f) {
    EventRecord e;
    e.kind = kind;
    e.fields = std::move(f);
    return e;
  };
  ReportRun run;
  run.record.status = RunStatus::finished;
  run.events = {ev("started", {}),
                ev("status", {{"to", "interrupted"}, {"reason", "writer process 1 on vm is gone"}}),
                ev("resumed", {{"from_step", 250}}),
                ev("status", {{"to", "interrupted"}, {"reason", "writer process 2 on vm is gone"}}),
                ev("resumed", {{"from_step", 250}}),
                ev("status", {{"to", "interrupted"}, {"reason", "writer process 3 on vm is gone"}}),
                ev("resumed", {{"from_step", 275}}),
                ev("finished", {{"steps", 300}}),
                ev("spot/interruption", {{"killed", true}, {"step_reached", 260}, {"resumed_from", 250}}),
                ev("spot/interruption", {{"killed", true}, {"step_reached", 250}, {"resumed_from", 250}}),
                ev("spot/interruption", {{"killed", true}, {"step_reached", 280}, {"resumed_from", 275}})};
  const RunHistory h = run_history(run);
  ASSERT_EQ(h.segments.size(), 4u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(h.segments[i].ended, "killed after the spot notice") << i;
  EXPECT_EQ(*h.segments[0].reached_step, 260);
  EXPECT_EQ(*h.segments[1].reached_step, 250);
  EXPECT_EQ(*h.segments[2].reached_step, 280);
  EXPECT_EQ(h.segments[3].ended, "finished");
}

// Chart markers: where a training stage starts (not the stepless prune / benchmark phases, not a
// phase re-entered by a resume) and each resume while there are at most five.
TEST(ReportCharts, MarkersAreTrainingStagesAndAFewResumes) {
  const auto ev = [](const std::string& kind, nlohmann::json f) {
    EventRecord e;
    e.kind = kind;
    e.fields = std::move(f);
    return e;
  };
  ReportRun run;
  run.events = {ev("phase", {{"phase", "train"}, {"first_step", 0}, {"steps", 32}}),
                ev("phase", {{"phase", "prune"}, {"first_step", 32}, {"steps", 0}}),
                ev("phase", {{"phase", "finetune"}, {"first_step", 32}, {"steps", 16}}),
                ev("phase", {{"phase", "qat"}, {"first_step", 32}, {"steps", 8}}),
                ev("resumed", {{"from_step", 40}}),
                ev("phase", {{"phase", "finetune"}, {"first_step", 32}, {"steps", 16}, {"start", {{"epoch", 0}}}}),
                ev("phase", {{"phase", "benchmark"}, {"first_step", 48}, {"steps", 0}})};
  const std::vector<std::pair<double, std::string>> markers = chart_markers(run);
  ASSERT_EQ(markers.size(), 2u);
  EXPECT_EQ(markers[0], std::make_pair(32.0, std::string("finetune, qat")));
  EXPECT_EQ(markers[1], std::make_pair(40.0, std::string("resumed")));
  for (int i = 0; i < 5; ++i)
    run.events.push_back(ev("resumed", {{"from_step", 41 + i}}));
  EXPECT_EQ(chart_markers(run).size(), 1u);  // six resumes: the Run history table has them
}

}  // namespace
}  // namespace lathe::report
