// `lathe-cli scaling` (see cli_scaling.h).
#include "app/cli_scaling.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "app/cli_checks.h"
#include "app/cli_history.h"
#include "engine/core/error.h"
#include "engine/dist/scaling_model.h"
#include "engine/store/store.h"
#include "nlohmann/json.hpp"

namespace lathe::cli {

namespace {

using nlohmann::json;

struct Options {
  std::string run;
  double bus_gbps = 0;
  double hop_latency_us = 0;
  double hidden = -1;  // < 0: fitted from a multi-rank run, 0 for a 1-rank run
  std::vector<int> ranks = {1, 2, 4, 8};
  bool json_out = false;
};

int cmd_scaling(const std::string& db, const Options& o) {
  Store store = open_for_reading(db);
  const std::string id = store.resolve_run(o.run);
  const RunRecord r = store.run(id);
  std::map<std::string, double> last;
  for (const MetricSummary& s : store.summaries(id))
    last[s.metric] = s.last;
  const json cfg = json::parse(r.config_json, nullptr, false);
  const auto train = cfg.is_object() ? cfg.value("train", json::object()) : json::object();
  const int64_t batch = train.value("batch_size", int64_t{0});
  if (!last.count("train/samples_per_s") || batch < 1)
    throw DataError("run " + id + " has no train/samples_per_s or train.batch_size: it trained no steps to scale");
  const int world = last.count("dist/world_size") ? static_cast<int>(last["dist/world_size"]) : 1;
  // Steady values over the run, not its last interval (which may be short or disturbed).
  auto steady = [&](const std::string& metric, int* used) {
    std::vector<double> values;
    for (const Point& p : store.series(id, metric))
      if (std::isfinite(p.value))
        values.push_back(p.value);
    *used = values.size() > 1 ? static_cast<int>(values.size()) - 1 : static_cast<int>(values.size());
    return dist::steady_value(values);
  };
  int rate_samples = 0, comm_samples = 0;
  const double samples_per_s = steady("train/samples_per_s", &rate_samples);
  const double exposed = world > 1 && last.count("dist/comm_s") ? steady("dist/comm_s", &comm_samples) : 0;
  if (!(samples_per_s > 0))
    throw DataError("run " + id + " has no positive train/samples_per_s: it trained no steps to scale");
  const double step_s = static_cast<double>(world * batch) / samples_per_s;
  const std::string measured_how =
      "median of " + std::to_string(rate_samples) + " train/samples_per_s" +
      (comm_samples > 0 ? " and " + std::to_string(comm_samples) + " dist/comm_s" : std::string()) +
      " samples" + (rate_samples > 1 || comm_samples > 1 ? ", the first (warm-up) left out" : std::string());

  dist::ScalingInputs in;
  in.batch_per_rank = batch;
  in.compute_s = step_s - exposed;
  in.bus_bytes_per_s = o.bus_gbps * 1e9;
  in.hop_latency_s = o.hop_latency_us * 1e-6;
  std::string bytes_how;
  if (last.count("dist/bytes_per_step")) {
    in.grad_bytes = last["dist/bytes_per_step"];
    bytes_how = "dist/bytes_per_step of the run";
  } else if (last.count("model/params")) {
    const std::string comp = cfg.value("compute", json::object()).value("grad_compression", "none");
    in.grad_bytes = last["model/params"] * (comp == "none" ? 4 : 2);
    bytes_how = "model/params x " + std::string(comp == "none" ? "4 (f32)" : "2 (" + comp + ")");
  } else {
    throw DataError("run " + id + " has neither dist/bytes_per_step nor model/params: no gradient size to send");
  }
  std::string hidden_how;
  if (o.hidden >= 0) {
    in.hidden_fraction = o.hidden;
    hidden_how = "given (--hidden)";
  } else if (world > 1) {
    in.hidden_fraction =
        dist::fitted_hidden_fraction(exposed, in.grad_bytes, world, in.bus_bytes_per_s, in.hop_latency_s);
    hidden_how = "fitted: the run's dist/comm_s against the model's all-reduce on " + std::to_string(world) + " ranks";
  } else {
    in.hidden_fraction = 0;
    hidden_how = "none assumed: a 1-rank run measures no overlap (give --hidden)";
  }
  const auto points = dist::project_scaling(in, o.ranks);
  const std::string measured = "run " + id + " on " + std::to_string(world) + " rank(s), " + r.backend + ", " + r.host;

  if (o.json_out) {
    json pts = json::array();
    for (const auto& p : points)
      pts.push_back({{"ranks", p.ranks},
                     {"allreduce_s", p.allreduce_s},
                     {"exposed_s", p.exposed_s},
                     {"step_s", p.step_s},
                     {"samples_per_s", p.samples_per_s},
                     {"efficiency", p.efficiency}});
    std::cout << json{{"run", id},
                      {"measured_on", measured},
                      {"projected", true},
                      {"samples_per_s", samples_per_s},
                      {"comm_s", exposed},
                      {"measured_how", measured_how},
                      {"compute_s", in.compute_s},
                      {"batch_per_rank", batch},
                      {"grad_bytes", in.grad_bytes},
                      {"grad_bytes_how", bytes_how},
                      {"bus_gbps", o.bus_gbps},
                      {"hop_latency_us", o.hop_latency_us},
                      {"hidden_fraction", in.hidden_fraction},
                      {"hidden_how", hidden_how},
                      {"points", pts}}
                     .dump()
              << "\n";
    return 0;
  }
  std::printf("scaling of %s (projection, not a measurement)\n", measured.c_str());
  std::printf("  measured       %.0f samples/s, %.3f ms exposed communication per step (%s)\n", samples_per_s,
              exposed * 1e3, measured_how.c_str());
  std::printf("  per-rank step  %.3f ms compute, batch %lld per rank\n", in.compute_s * 1e3,
              static_cast<long long>(batch));
  std::printf("  gradients      %.0f B per step (%s)\n", in.grad_bytes, bytes_how.c_str());
  std::printf("  link           %.3g GB/s bus bandwidth, %.3g us per hop (given)\n", o.bus_gbps, o.hop_latency_us);
  std::printf("  overlap        %.0f%% of the all-reduce hidden (%s)\n", in.hidden_fraction * 100, hidden_how.c_str());
  std::printf("  %6s %12s %12s %10s %14s %10s\n", "ranks", "allreduce ms", "exposed ms", "step ms", "samples/s",
              "efficiency");
  for (const auto& p : points)
    std::printf("  %6d %12.3f %12.3f %10.3f %14.0f %9.1f%%\n", p.ranks, p.allreduce_s * 1e3, p.exposed_s * 1e3,
                p.step_s * 1e3, p.samples_per_s, p.efficiency * 100);
  return 0;
}

}  // namespace

void add_scaling_command(CLI::App& app, const std::string& db_path, int& exit_code) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "scaling", "Projected throughput of a recorded run's training on N ranks (ring all-reduce model)");
  cmd->add_option("run", o->run, "A recorded run (id, unique prefix or name)")->required();
  cmd->add_option("--bus-gbps", o->bus_gbps, "The link's all-reduce bus bandwidth in GB/s (e.g. bench/allreduce's)")
      ->required()
      ->check(kPositive);
  cmd->add_option("--hop-latency-us", o->hop_latency_us, "Latency per ring hop in microseconds")
      ->capture_default_str()
      ->check(kNonNegative);
  cmd->add_option("--hidden", o->hidden,
                  "Share of the all-reduce the backward pass hides, 0..1 (default: fitted from a multi-rank run)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--ranks", o->ranks, "Rank counts to project")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_flag("--json", o->json_out, "Print the projection as JSON");
  cmd->callback([o, &db_path, &exit_code] { exit_code = cmd_scaling(db_path, *o); });
}

}  // namespace lathe::cli
