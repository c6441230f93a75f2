// run_history, spot_figures, the run facts read from events and the config, and the Run history
// and Spot sections (see report_history.h).
#include "widgets/report/report_history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "widgets/report/report_html_parts.h"
#include "widgets/report/report_text.h"

namespace lathe::report {

namespace {

std::optional<double> number(const nlohmann::json& f, const char* key) {
  if (!f.is_object() || !f.contains(key) || !f[key].is_number())
    return std::nullopt;
  return f[key].get<double>();
}

std::string text(const nlohmann::json& f, const char* key) {
  return f.is_object() && f.contains(key) && f[key].is_string() ? f[key].get<std::string>() : "";
}

std::optional<double> last(const ReportRun& run, const std::string& metric) {
  const MetricSummary* s = run.summary(metric);
  if (!s || s->count == 0)
    return std::nullopt;
  return s->last;
}

const EventRecord* first_event(const ReportRun& run, const std::string& kind) {
  for (const EventRecord& e : run.events)
    if (e.kind == kind)
      return &e;
  return nullptr;
}

/// "202.7 GFLOP/s"; from 1 TFLOP/s (a GPU's datasheet peak) "989.5 TFLOP/s".
std::string gflops(double flops_per_s) {
  char buf[48];
  if (flops_per_s >= 1e12)
    std::snprintf(buf, sizeof buf, "%.1f TFLOP/s", flops_per_s / 1e12);
  else
    std::snprintf(buf, sizeof buf, "%.1f GFLOP/s", flops_per_s / 1e9);
  return buf;
}

}  // namespace

std::string run_param(const ReportRun& run, const std::string& key) {
  for (const auto& [k, v] : run.params)
    if (k == key)
      return v;
  return "";
}

RunHistory run_history(const ReportRun& run) {
  RunHistory h;
  bool noticed = false;     // a spot notice in the open segment
  size_t interruption = 0;  // the supervisor's interruptions, in order, are the segment boundaries
  auto open = [&]() -> RunSegment* { return h.segments.empty() ? nullptr : &h.segments.back(); };
  for (const EventRecord& e : run.events) {
    const nlohmann::json& f = e.fields;
    if (e.kind == "started" && h.segments.empty()) {
      h.segments.push_back({});
      h.segments.back().start_ms = e.at_ms;
      noticed = false;
    } else if (e.kind == "resumed") {
      RunSegment next;
      next.start_ms = e.at_ms;
      next.from_step = static_cast<int64_t>(number(f, "from_step").value_or(0));
      next.checkpoint = text(f, "checkpoint");
      h.segments.push_back(next);
      noticed = false;
    } else if (e.kind == "spot/notice") {
      noticed = true;
    } else if (RunSegment* s = open();
               s && !s->end_ms &&
               (e.kind == "finished" || e.kind == "interrupted" || e.kind == "cancelled" || e.kind == "failed")) {
      s->end_ms = e.at_ms;
      s->ended = e.kind == "interrupted" && noticed ? "interrupted: spot notice" : e.kind;
      if (const auto steps = number(f, "steps"))
        s->reached_step = static_cast<int64_t>(*steps);
      const nlohmann::json m = f.is_object() && f.contains("metrics") ? f["metrics"] : nlohmann::json();
      s->train_seconds = number(m, "train/seconds");
      s->samples_per_s_mean = number(m, "train/samples_per_s_mean");
      s->mfu_mean = number(m, "device/mfu_mean");
    } else if (RunSegment* s = open(); s && !s->end_ms && e.kind == "status") {
      // A writer that died (kill -9, a lost machine) ends its segment with a status event only.
      const std::string to = text(f, "to");
      if (to == "interrupted" || to == "failed" || to == "cancelled") {
        s->end_ms = e.at_ms;
        const std::string why = !text(f, "reason").empty() ? text(f, "reason") : text(f, "error");
        s->ended = why.empty() ? to : to + ": " + why;
      }
    } else if (e.kind == "spot/interruption") {
      // The supervisor's record, written at the end: the step the interrupted segment reached and
      // whether the machine was killed before the checkpoint was taken.
      // In order: several segments may resume from the same checkpoint (killed before the next).
      const auto from = number(f, "resumed_from");
      for (size_t i = interruption + 1; from && i < h.segments.size(); ++i)
        if (h.segments[i].from_step == static_cast<int64_t>(*from)) {
          interruption = i;
          RunSegment& prev = h.segments[i - 1];
          if (const auto reached = number(f, "step_reached"); reached && *reached >= 0)
            prev.reached_step = static_cast<int64_t>(*reached);
          if (f.value("killed", false))
            prev.ended = "killed after the spot notice";
          break;
        }
    }
  }
  if (!h.segments.empty() && !h.segments.back().end_ms && h.segments.back().ended.empty())
    h.segments.back().ended = run.record.status == RunStatus::running ? "running" : "-";
  double seconds = 0, samples = 0, mfu_seconds = 0, mfu_weighted = 0;
  for (const RunSegment& s : h.segments) {
    if (!s.train_seconds || !s.samples_per_s_mean || *s.train_seconds <= 0)
      continue;
    ++h.with_means;
    seconds += *s.train_seconds;
    samples += *s.samples_per_s_mean * *s.train_seconds;
    if (s.mfu_mean) {
      mfu_seconds += *s.train_seconds;
      mfu_weighted += *s.mfu_mean * *s.train_seconds;
    }
  }
  if (seconds > 0)
    h.samples_per_s_mean = samples / seconds;
  if (mfu_seconds > 0)
    h.mfu_mean = mfu_weighted / mfu_seconds;
  return h;
}

std::optional<SpotFigures> spot_figures(const ReportRun& run) {
  const EventRecord* summary = first_event(run, "spot/summary");
  if (!summary && !run.summary("spot/interruptions"))
    return std::nullopt;
  SpotFigures s;
  const nlohmann::json f = summary ? summary->fields : nlohmann::json::object();
  const auto pick = [&](const char* metric, const char* field) {
    if (const auto v = last(run, metric))
      return *v;
    return number(f, field).value_or(0.0);
  };
  s.interruptions = pick("spot/interruptions", "interruptions");
  s.kills = pick("spot/kills", "kills");
  s.restarts = pick("spot/restarts", "restarts");
  s.steps_redone = pick("spot/steps_redone", "steps_redone");
  s.seconds_redone = pick("spot/seconds_redone", "seconds_redone");
  s.restart_wait_s = pick("spot/restart_wait_s", "restart_wait_s");
  s.restart_setup_s = pick("spot/restart_setup_s", "restart_setup_s");
  s.wall_s = pick("spot/wall_s", "wall_s");
  s.on_demand_equivalent_s =
      number(f, "on_demand_equivalent_s")
          .value_or(std::max(0.0, s.wall_s - s.restart_wait_s - s.restart_setup_s - s.seconds_redone));
  s.cost_spot_usd = last(run, "cost/usd");
  s.cost_on_demand_usd = last(run, "cost/usd_on_demand");
  return s;
}

std::string ranks_text(const ReportRun& run) {
  const EventRecord* started = first_event(run, "started");
  const auto threads = started ? number(started->fields, "threads") : std::nullopt;
  const std::string per = threads ? format_value(*threads) + (*threads == 1 ? " thread" : " threads") : "";
  const auto world = last(run, "dist/world_size");
  if (!world || *world <= 1)
    return per;
  std::string s = format_value(*world) + " data-parallel ranks" + (per.empty() ? "" : " x " + per);
  if (run_param(run, "compute.shard_optimizer") == "true")
    s += ", optimizer state sharded (ZeRO-1)";
  if (const std::string c = run_param(run, "compute.grad_compression"); !c.empty() && c != "none")
    s += ", gradients reduced in " + c;
  return s;
}

std::string precision_text(const ReportRun& run) {
  const std::string p = run_param(run, "train.precision");
  if (p.empty())
    return "";
  if (const EventRecord* e = first_event(run, "precision")) {
    const std::string note = text(e->fields, "note");
    if (!note.empty())
      return p + ": " + note;
  }
  return p;
}

std::string mfu_peak_dtype(const ReportRun& run) {
  const EventRecord* started = first_event(run, "started");
  return started ? text(started->fields, "peak_flops_dtype") : "";
}

std::string mfu_peak_text(const ReportRun& run) {
  const EventRecord* started = first_event(run, "started");
  if (!started)
    return "";
  const auto peak = number(started->fields, "peak_flops_per_s");
  const std::string how = text(started->fields, "peak_flops_how");
  if (!peak || *peak <= 0)  // no peak: say why there is no MFU (a GPU the datasheet table lacks)
    return how.rfind("unknown", 0) == 0 ? "none, " + how : "";
  const std::string dtype = mfu_peak_dtype(run);
  std::string s = gflops(*peak) + (dtype.empty() ? "" : " " + dtype);
  if (last(run, "dist/world_size").value_or(1) > 1)
    s += " per rank";
  if (!how.empty())
    s += " (" + how + ")";
  double raised = 0;
  for (const EventRecord& e : run.events)
    if (e.kind == "note" && text(e.fields, "kind") == "mfu_peak_raised")
      raised = std::max(raised, number(e.fields, "achieved_flops_per_s").value_or(0));
  if (raised > *peak)
    s += "; raised to " + gflops(raised) + " during the run, which achieved that";
  return s;
}

std::vector<std::pair<double, std::string>> chart_markers(const ReportRun& run) {
  std::vector<std::pair<double, std::string>> out;
  const auto add = [&](double step, const std::string& label) {
    for (auto& m : out)
      if (m.first == step) {  // one marker per step, its labels joined
        if (m.second.find(label) == std::string::npos)
          m.second += ", " + label;
        return;
      }
    out.emplace_back(step, label);
  };
  std::vector<double> resumes;
  for (const EventRecord& e : run.events) {
    if (e.kind == "phase") {
      const auto first = number(e.fields, "first_step"), steps = number(e.fields, "steps");
      const nlohmann::json& start =
          e.fields.is_object() && e.fields.contains("start") ? e.fields["start"] : nlohmann::json();
      // A training phase (it takes steps) that starts after step 0, and not the same phase again
      // after a resume (which says where it starts within the phase).
      if (first && steps && *first > 0 && *steps > 0 && start.is_null())
        add(*first, text(e.fields, "phase"));
    } else if (e.kind == "resumed") {
      if (const auto from = number(e.fields, "from_step"))
        resumes.push_back(*from);
    }
  }
  if (resumes.size() <= 5)
    for (double step : resumes)
      add(step, "resumed");
  std::sort(out.begin(), out.end());
  return out;
}

namespace html {

void write_history(std::string& out, const ReportRun& run) {
  const RunHistory h = run_history(run);
  if (h.segments.size() > 1) {
    out += section("Run history");
    out += "<p class=\"sub\">Trained in " + std::to_string(h.segments.size()) +
           " segments: " + std::to_string(h.resumes()) +
           " resume(s) from a checkpoint. Steps go on across segments; steps between a segment's last "
           "checkpoint and its end are trained again by the next one.</p>\n";
    Table t(out, {"#", "Started", "From step", "Reached step", "Ended", "Wall", "Train samples/s (mean)"},
            {true, false, true, true, false, true, true});
    for (size_t i = 0; i < h.segments.size(); ++i) {
      const RunSegment& s = h.segments[i];
      std::string wall = "-";
      if (s.end_ms) {
        const double secs = static_cast<double>(*s.end_ms - s.start_ms) / 1000.0;
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f s", secs);
        wall = secs < 60 ? buf : format_duration_s(secs);
      }
      // A killed segment's last step is not in the store (the supervisor's is its last logged step);
      // the checkpoint the next segment resumed from is a lower bound.
      std::string reached = "<span class=\"muted\">-</span>";
      const bool next = i + 1 < h.segments.size();
      if (s.reached_step && (!next || *s.reached_step >= h.segments[i + 1].from_step))
        reached = esc(std::to_string(*s.reached_step));
      else if (next)
        reached = "&ge; " + esc(std::to_string(h.segments[i + 1].from_step));
      t.row({std::to_string(i + 1), esc(format_local_time(s.start_ms)), esc(std::to_string(s.from_step)), reached,
             esc(s.ended), esc(wall),
             s.samples_per_s_mean ? esc(format_value(*s.samples_per_s_mean)) : "<span class=\"muted\">-</span>"});
    }
  }
  const std::optional<SpotFigures> spot = spot_figures(run);
  if (!spot)
    return;
  out += section("Spot (simulated)");
  const std::string rate = run_param(run, "cost.interruptions_per_hour");
  out += "<p class=\"sub\">lathe-cli simulated a spot market on this machine" +
         (rate.empty() ? std::string() : " (cost.interruptions_per_hour = " + esc(rate) + ", seeded)") +
         ": notices at random times, the machine killed when the notice window ends, a wait for a new "
         "instance, then a resume. The times below are measured; the on-demand cost is a projection.</p>\n";
  Table t(out, {"Figure", "Value"}, {false, true});
  const auto secs = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", s);
    return std::string(buf);
  };
  t.row({"Interruptions (notices)", esc(format_value(spot->interruptions))});
  t.row({"Killed before their checkpoint", esc(format_value(spot->kills))});
  t.row(
      {"Restarts; waiting for instances", esc(format_value(spot->restarts)) + "; " + esc(secs(spot->restart_wait_s))});
  t.row({"Set-up after restarts (measured)", esc(secs(spot->restart_setup_s))});
  t.row(
      {"Work redone (measured)", esc(format_value(spot->steps_redone)) + " steps, " + esc(secs(spot->seconds_redone))});
  t.row({"Wall time, all segments and waits (measured)", esc(secs(spot->wall_s))});
  t.row({"Of which the work itself (the on-demand equivalent)", esc(secs(spot->on_demand_equivalent_s))});
  const std::string instance = run.instance.empty() ? "the instance" : run.instance;
  const auto dollars = [](double usd) {  // 4 significant digits: cents and fractions of a cent alike
    char buf[48];
    std::snprintf(buf, sizeof buf, std::fabs(usd) >= 1000 ? "$%.2f" : "$%.4g", usd);
    return std::string(buf);
  };
  const std::string pricing = run_param(run, "cost.pricing");
  if (spot->cost_spot_usd)
    t.row(
        {"Cost as run: " + esc(instance) + "'s " + esc(pricing.empty() ? "" : pricing + " ") + "price x the wall time",
         esc(dollars(*spot->cost_spot_usd))});
  if (spot->cost_on_demand_usd)
    t.row({"Projected: the same work on-demand (on-demand price x the work's time)",
           esc(dollars(*spot->cost_on_demand_usd))});
  if (spot->cost_spot_usd && spot->cost_on_demand_usd && *spot->cost_on_demand_usd > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * (*spot->cost_spot_usd / *spot->cost_on_demand_usd - 1.0));
    t.row({"As run against on-demand (negative: saved)", esc(buf)});
  }
}

}  // namespace html

}  // namespace lathe::report
