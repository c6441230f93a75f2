// stage_rows and the Stage results section (see report_stages.h).
#include "widgets/report/report_stages.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "widgets/common/contention.h"
#include "widgets/report/report_html_parts.h"
#include "widgets/report/report_text.h"

namespace lathe::report {

namespace {

std::optional<double> last(const ReportRun& run, const std::string& metric) {
  const MetricSummary* s = run.summary(metric);
  if (!s || s->count == 0)
    return std::nullopt;
  return s->last;
}

/// A row of the latency label ("dense", "pruned", "f32", "int8") the stages log under latency/<label>/.
StageRow measured(const ReportRun& run, std::string model, const std::string& label) {
  StageRow r;
  r.model = std::move(model);
  r.b1_ms = last(run, "latency/" + label + "/b1_ms");
  r.b256_ms = last(run, "latency/" + label + "/b256_ms");
  r.b256_samples_per_s = last(run, "throughput/" + label + "/b256_samples_per_s");
  r.b1_spread_pct = last(run, "latency/" + label + "/b1_spread_pct");
  r.b256_spread_pct = last(run, "latency/" + label + "/b256_spread_pct");
  for (const char* b : {"b1", "b256"})
    if (const auto share = last(run, "latency/" + label + "/" + b + "_others_cpu_share"))
      r.others_cpu_share = std::max(r.others_cpu_share.value_or(0.0), *share);
  return r;
}

void speedup_over(StageRow& row, const StageRow& base, std::string baseline) {
  row.baseline = std::move(baseline);
  row.speedup_contended = row.contended() || base.contended();
  if (row.b1_ms && base.b1_ms && *row.b1_ms > 0)
    row.speedup_b1 = *base.b1_ms / *row.b1_ms;
  if (row.b256_ms && base.b256_ms && *row.b256_ms > 0)
    row.speedup_b256 = *base.b256_ms / *row.b256_ms;
}

bool any_latency(const std::vector<StageRow>& rows) {
  for (const StageRow& r : rows)
    if (r.b1_ms || r.b256_ms)
      return true;
  return false;
}

}  // namespace

std::vector<StageRow> stage_rows(const ReportRun& run) {
  std::vector<StageRow> rows;
  // Pruning (unstructured or structured): the dense baseline measured in the run, then the pruned model.
  if (run.summary("latency/dense/b1_ms") || run.summary("dense/test_accuracy")) {
    StageRow dense = measured(run, "dense", "dense");
    dense.accuracy = last(run, "dense/test_accuracy");
    dense.bytes = last(run, "model/dense_bytes");
    StageRow pruned = measured(run, "pruned", "pruned");
    pruned.accuracy = last(run, "pruned/test_accuracy");
    if (const auto ratio = last(run, "prune/bytes_ratio"); ratio && dense.bytes)
      pruned.bytes = *ratio * *dense.bytes;
    speedup_over(pruned, dense, "dense");
    rows.push_back(dense);
    rows.push_back(pruned);
  }
  // Quantization: the f32 model it started from, then the INT8 model.
  if (run.summary("quant/test_accuracy")) {
    StageRow f32 = measured(run, "f32 (before INT8)", "f32");
    f32.accuracy = last(run, "quant/f32_test_accuracy");
    f32.bytes = last(run, "model/f32_bytes");
    StageRow int8 = measured(run, "INT8", "int8");
    int8.accuracy = last(run, "quant/test_accuracy");
    int8.bytes = last(run, "model/int8_bytes");
    speedup_over(int8, f32, "f32");
    rows.push_back(f32);
    rows.push_back(int8);
  }
  const std::optional<double> teacher_accuracy = last(run, "distill/teacher_accuracy");
  if (rows.empty()) {
    StageRow trained;
    trained.model = teacher_accuracy ? "student (distilled)" : "trained";
    trained.accuracy = last(run, "test/accuracy");
    trained.bytes = last(run, "model/bytes");
    rows.push_back(trained);
  }
  // Distillation: the teacher's test accuracy (measured in the run or taken from its cache; the
  // distill event says which), first, as the student's reference.
  if (teacher_accuracy) {
    StageRow teacher;
    teacher.model = "distillation teacher";
    teacher.accuracy = teacher_accuracy;
    rows.insert(rows.begin(), teacher);
  }
  return rows;
}

namespace html {

void write_stage_results(std::string& out, const ReportRun& run) {
  const std::vector<StageRow> rows = stage_rows(run);
  out += section("Stage results");
  Table t(out,
          {"Model", "Test accuracy", "Bytes", "Latency b1", "Latency b256", "Throughput b256", "Speedup b1",
           "Speedup b256"},
          {false, true, true, true, true, true, true, true});
  const auto cell = [](const std::optional<double>& v, const char* unit) -> std::string {
    if (!v)
      return "<span class=\"muted\">-</span>";
    char buf[64];
    const std::string u = unit;
    if (u == "%")
      std::snprintf(buf, sizeof buf, "%.2f %%", 100.0 * *v);
    else if (u == "ms")
      std::snprintf(buf, sizeof buf, *v >= 100 ? "%.1f ms" : "%.3g ms", *v);
    else if (u == "x")
      std::snprintf(buf, sizeof buf, "%.3gx", *v);
    else if (u == "bytes")
      return esc(format_headline("bytes", *v));
    else
      return esc(format_value(*v)) + " samples/s";
    return esc(buf);
  };
  const auto latency = [&](const std::optional<double>& ms, const std::optional<double>& spread, bool contended) {
    std::string s = cell(ms, "ms");
    if (ms && spread && *spread >= 1)
      s += " <span class=\"muted\">&plusmn;" + esc(format_value(std::round(*spread / 2))) + "%</span>";
    if (ms && contended)
      s += " <span class=\"error\">*</span>";
    return s;
  };
  const auto speedup = [&](const std::optional<double>& x, bool contended) {
    std::string s = cell(x, "x");
    if (x && contended)
      s += " <span class=\"error\">&dagger;</span>";
    return s;
  };
  bool any_contended = false, any_speedup_contended = false;
  for (const StageRow& r : rows) {
    std::string name = esc(r.model);
    if (!r.baseline.empty())
      name += " <span class=\"muted\">(vs " + esc(r.baseline) + ")</span>";
    any_contended = any_contended || r.contended();
    any_speedup_contended = any_speedup_contended || (r.speedup_contended && (r.speedup_b1 || r.speedup_b256));
    t.row({name, cell(r.accuracy, "%"), cell(r.bytes, "bytes"), latency(r.b1_ms, r.b1_spread_pct, r.contended()),
           latency(r.b256_ms, r.b256_spread_pct, r.contended()), cell(r.b256_samples_per_s, "rate"),
           speedup(r.speedup_b1, r.speedup_contended), speedup(r.speedup_b256, r.speedup_contended)});
  }
  t.close();
  if (any_speedup_contended)
    out += std::string("<p class=\"sub\"><span class=\"error\">&dagger;</span> speedup ") +
           esc(widgets::kContendedSpeedupNote) + ".</p>\n";
  if (any_contended)
    out +=
        "<p class=\"sub\"><span class=\"error\">*</span> contended: other processes used more than 20% of the CPUs "
        "while this was timed; the figure and the speedups built on it are not trustworthy.</p>\n";
  // Where the latencies were timed: each latency event names its device (the INT8 kernels' ISA too).
  std::string devices;
  for (const EventRecord& e : run.events)
    if (e.kind == "latency" && e.fields.is_object() && e.fields.contains("device") && e.fields["device"].is_string()) {
      const std::string d = e.fields["device"].get<std::string>();
      if (devices.find(d) == std::string::npos)
        devices += (devices.empty() ? "" : "; ") + d;
    }
  std::string threads;
  for (const EventRecord& e : run.events)
    if (e.kind == "started" && e.fields.is_object() && e.fields.contains("threads") && e.fields["threads"].is_number())
      threads = format_value(e.fields["threads"].get<double>());
  if (any_latency(rows))
    out +=
        "<p class=\"sub\">Latency: median wall time of an evaluation-mode forward pass at batch 1 and 256, measured "
        "in this run" +
        (devices.empty() ? std::string() : " on " + esc(devices)) +
        (threads.empty() ? std::string() : ", " + esc(threads) + (threads == "1" ? " thread" : " threads")) +
        " (&plusmn;: half the 10-90th percentile spread of the repetitions); speedup: the baseline's latency "
        "over this model's.</p>\n";
}

}  // namespace html

}  // namespace lathe::report
