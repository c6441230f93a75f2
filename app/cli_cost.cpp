// lathe-cli's cost commands: `prices` lists the price catalog with dates, sources and older
// figures; `cost CONFIG|RUN` says what a run costs on-demand and on spot, from a step time measured
// on this machine (a config: a few real training steps; a run: its recorded wall time) and a
// checkpoint write timed here, with the checkpoint interval Young and Daly recommend.
#include "app/cli_cost.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "app/cli_history.h"
#include "engine/core/error.h"
#include "engine/run/config.h"
#include "engine/run/cost_estimate.h"
#include "engine/run/device_peaks.h"
#include "engine/run/metrics_sink.h"
#include "engine/run/trainer.h"
#include "engine/store/store.h"

namespace lathe::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string money(double usd) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), usd < 10 ? "$%.4f" : "$%.2f", usd);
  return buf;
}

std::string duration(double s) {
  char buf[32];
  if (s < 1)
    std::snprintf(buf, sizeof(buf), "%.1f ms", s * 1e3);
  else if (s < 120)
    std::snprintf(buf, sizeof(buf), "%.1f s", s);
  else if (s < 7200)
    std::snprintf(buf, sizeof(buf), "%.1f min", s / 60);
  else
    std::snprintf(buf, sizeof(buf), "%.2f h", s / 3600);
  return buf;
}

/// Bytes a checkpoint holds: the f32 weights plus the optimizer's per-parameter state.
int64_t checkpoint_bytes(double params, const json& cfg) {
  const json& opt = cfg.value("train", json::object()).value("optimizer", json::object());
  const std::string type = opt.value("type", "sgd");
  const double momentum = opt.value("momentum", 0.9);
  const double states = type == "adamw" ? 2 : (momentum > 0 ? 1 : 0);
  return static_cast<int64_t>(params * 4 * (1 + states));
}

/// Captures the started event (peak FLOP/s) and the parameter count of a measuring run.
struct MeasureSink final : MetricsSink {
  double params = 0, peak_flops = 0;
  std::string peak_how, peak_dtype;
  void sample(const std::string& metric, int64_t, double, double value) override {
    if (metric == "model/params")
      params = value;
  }
  void event(const std::string& kind, const json& fields) override {
    if (kind == "started") {
      peak_flops = fields.value("peak_flops_per_s", 0.0);
      peak_how = fields.value("peak_flops_how", "");
      peak_dtype = fields.value("peak_flops_dtype", "");
    }
  }
};

struct Measured {
  double work_s = 0;
  std::string work_how;
  double params = 0, peak_flops = 0;  ///< one rank's peak (its threads or its GPU)
  std::string peak_dtype;             ///< of that peak: "f32", "tf32", "bf16", "f16" ("" : f32)
  std::string measured_on;  ///< the instance the step time was measured on ("local" here)
  json config;
};

/// Runs `steps` real training steps of the config (nothing written) and projects the training phase.
Measured measure_config(const std::string& path, const std::vector<std::string>& sets, int steps) {
  json raw = load_config_file(path);
  for (const std::string& s : sets)
    apply_override(raw, s);
  const ExperimentConfig cfg = parse_experiment(validate_config(raw));
  std::atomic<bool> stop{false};
  MeasureSink sink;
  RunOptions opts;
  opts.write_run_dir = false;
  opts.stop = &stop;
  opts.extra_sink = &sink;
  const int warmup = std::min(3, steps / 4);
  double t_warm = -1, t_end = -1;
  int64_t total = 0, counted = 0;
  opts.on_progress = [&](const Progress& p) {
    total = p.total_steps;
    if (p.step == warmup)
      t_warm = p.elapsed_s;
    if (p.step >= warmup + steps && t_end < 0) {
      t_end = p.elapsed_s;
      counted = p.step - warmup;
      stop = true;
    }
  };
  std::fprintf(stderr, "lathe-cli cost: timing %d training steps of %s on this machine...\n", steps, path.c_str());
  const RunSummary s = run_experiment(cfg, opts);
  if (t_end < 0 || counted <= 0) {  // the whole training phase was shorter than the measurement
    t_end = s.elapsed_s;
    counted = std::max<int64_t>(1, s.steps - warmup);
  }
  const double step_s = (t_end - std::max(0.0, t_warm)) / static_cast<double>(counted);
  Measured m;
  m.work_s = step_s * static_cast<double>(total);
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "projected: %lld steps measured here (%s, %.2f ms each after %d warm-up steps) x %lld planned "
                "training steps; evaluation and compression stages not included",
                static_cast<long long>(counted), s.device.c_str(), step_s * 1e3, warmup, static_cast<long long>(total));
  m.work_how = buf;
  m.params = sink.params;
  m.peak_flops = sink.peak_flops;
  m.peak_dtype = sink.peak_dtype;
  m.measured_on = "local";
  m.config = cfg.raw;
  return m;
}

/// A recorded run: its own wall time, parameters and the peak it ran against.
Measured measure_run(const std::string& db, const std::string& ref) {
  Store store = open_for_reading(db);
  const std::string id = store.resolve_run(ref);
  const RunRecord r = store.run(id);
  if (!r.started_ms)
    throw DataError("run " + id + " never started: it has no wall time to price");
  const int64_t end = r.finished_ms ? *r.finished_ms : r.heartbeat_ms.value_or(*r.started_ms);
  Measured m;
  m.work_s = static_cast<double>(end - *r.started_ms) / 1000.0;
  m.work_how = "measured: run " + id + "'s wall time on " + r.host + " (" + r.backend + ", " +
               std::string(status_name(r.status)) + ")";
  for (const MetricSummary& s : store.summaries(id))
    if (s.metric == "model/params")
      m.params = s.last;
  for (const EventRecord& e : store.events(id))
    if (e.kind == "started") {
      m.peak_flops = e.fields.value("peak_flops_per_s", 0.0);
      m.peak_dtype = e.fields.value("peak_flops_dtype", std::string());
    }
  m.config = json::parse(r.config_json, nullptr, false);
  if (m.config.is_discarded())
    m.config = json::object();
  m.measured_on = m.config.value("cost", json::object()).value("instance", "local");
  return m;
}

json estimate_json(const CostInputs& in, const CostEstimate& e, bool projected) {
  json curve = json::array();
  for (const IntervalCost& c : e.curve)
    curve.push_back({{"interval_s", c.interval_s}, {"wall_s", c.wall_s}, {"usd", c.usd}});
  return {{"instance", in.instance->name},
          {"devices", in.devices},
          {"instances", instances_needed(*in.instance, in.devices)},
          {"price_usd_per_hour",
           {{"on_demand", in.instance->on_demand_usd_per_hour}, {"spot", in.instance->spot_usd_per_hour}}},
          {"price_date", in.instance->price_date},
          {"work_s", in.work_s},
          {"work_how", in.work_how},
          {"work_projected", projected},
          {"checkpoint_s", in.checkpoint_s},
          {"checkpoint_how", in.checkpoint_how},
          {"restart_s", in.restart_s},
          {"interruptions_per_hour", in.interruptions_per_hour},
          {"on_demand", {{"wall_s", e.on_demand_wall_s}, {"usd", e.on_demand_usd}}},
          {"spot_no_interruptions_usd", e.spot_usd_no_interruptions},
          {"spot",
           {{"young_interval_s", e.young_interval_s},
            {"daly_interval_s", e.daly_interval_s},
            {"recommended_interval_s", e.young_interval_s},
            {"expected_wall_s", e.spot_wall_s},
            {"expected_usd", e.spot_usd},
            {"daly_closed_form_wall_s", e.spot_wall_daly_closed_s},
            {"monte_carlo_wall_s", e.spot_wall_monte_carlo_s},
            {"monte_carlo_runs", e.monte_carlo_runs}}},
          {"usd_vs_interval", curve}};
}

void print_estimate(const CostInputs& in, const CostEstimate& e) {
  const InstancePrice& p = *in.instance;
  std::cout << "cost on " << p.name << " (" << instances_needed(p, in.devices) << " instance(s) for " << in.devices
            << " device(s); " << money(p.on_demand_usd_per_hour) << "/h on-demand, " << money(p.spot_usd_per_hour)
            << "/h spot; prices of " << p.price_date << ", " << p.source << ")\n";
  std::cout << "  work        " << duration(in.work_s) << "  (" << in.work_how << ")\n";
  std::cout << "  checkpoint  " << duration(in.checkpoint_s) << "  (" << in.checkpoint_how << ")\n";
  std::cout << "  on-demand   " << duration(e.on_demand_wall_s) << ", " << money(e.on_demand_usd) << "\n";
  std::cout << "  spot        " << money(e.spot_usd_no_interruptions) << " without interruptions\n";
  if (in.interruptions_per_hour <= 0) {
    std::cout << "  (give --interruptions-per-hour L for the expected cost of interruptions)\n";
    return;
  }
  std::cout << "  spot at " << in.interruptions_per_hour << " interruption(s)/h, restart " << duration(in.restart_s)
            << ":\n"
            << "    recommended checkpoint interval " << duration(e.young_interval_s)
            << " (Young, sqrt(2 C M)); Daly's " << duration(e.daly_interval_s) << "\n"
            << "    expected " << duration(e.spot_wall_s) << ", " << money(e.spot_usd) << "  (Daly's closed form "
            << duration(e.spot_wall_daly_closed_s) << "; Monte Carlo, " << e.monte_carlo_runs
            << " runs: " << duration(e.spot_wall_monte_carlo_s) << ")\n"
            << "    $ against the checkpoint interval:\n";
  for (const IntervalCost& c : e.curve)
    std::cout << "      every " << duration(c.interval_s) << "  ->  " << duration(c.wall_s) << ", " << money(c.usd)
              << (std::fabs(c.interval_s - e.young_interval_s) < 1e-9 * e.young_interval_s ? "   <- recommended" : "")
              << "\n";
}

int cmd_cost(const std::string& db, const std::string& target, const std::vector<std::string>& sets,
             const std::string& instance_name, double lambda, double restart_s, int steps, bool json_out) {
  if (steps < 1)
    throw ConfigError("--steps " + std::to_string(steps) + ": allowed: an integer >= 1");
  if (!(lambda >= 0) || !(restart_s >= 0))
    throw ConfigError("--interruptions-per-hour and --restart-s: allowed: numbers >= 0");
  std::error_code ec;
  const bool is_config = fs::is_regular_file(target, ec) && fs::path(target).extension() == ".json";
  const PriceCatalog catalog = PriceCatalog::load(PriceCatalog::default_path());
  if (!instance_name.empty())
    catalog.find(instance_name);  // a wrong --instance is refused before the steps are timed
  if (!is_config && fs::path(target).extension() == ".json")
    throw ConfigError("cost " + target + ": no such config file" +
                      (fs::exists(target, ec) ? " (it is not a regular file)" : "") +
                      "; allowed: an experiment config (.json) or a recorded run (id, id prefix or name)");
  const Measured m = is_config ? measure_config(target, sets, steps) : measure_run(db, target);
  const std::string name =
      !instance_name.empty() ? instance_name : m.config.value("cost", json::object()).value("instance", "local");
  const json compute = m.config.value("compute", json::object());

  CostInputs in;
  in.instance = &catalog.find(name);
  in.devices = compute.value("devices", 1);
  in.restart_s = restart_s;
  in.interruptions_per_hour = lambda;
  in.work_s = m.work_s;
  in.work_how = m.work_how;
  bool projected = is_config;
  // Another instance than the one measured: scale by the ratio of the two devices' peaks for the
  // data type the run's matmuls ran at (a bf16 run's peak is its bf16 one), one rank's against one
  // of the target's devices (the ranks split the work the same way there), and say so.
  const std::string measured_type = peak_key(m.peak_dtype);
  const double target_peak = in.instance->peak_flops(measured_type);
  if (name != m.measured_on && target_peak > 0 && m.peak_flops > 0) {
    const double ratio = m.peak_flops / target_peak;
    in.work_s *= ratio;
    char buf[200];
    std::snprintf(buf, sizeof(buf), "; projected to %s by the %s peak ratio %.3g (%.3g / %.3g TFLOP/s per device)",
                  name.c_str(), measured_type.c_str(), ratio, m.peak_flops / 1e12, target_peak / 1e12);
    in.work_how += buf;
    projected = true;
  } else if (name != m.measured_on && m.peak_flops > 0) {
    in.work_how += "; not scaled to " + name + ": the catalog has no " + measured_type +
                   " peak for its devices, so this is this machine's time priced at its rate";
    projected = true;
  }
  const fs::path folder = is_config ? fs::temp_directory_path() : fs::absolute(db).parent_path();
  const int64_t bytes = checkpoint_bytes(m.params, m.config);
  in.checkpoint_s = measure_checkpoint_write(folder.string(), bytes);
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "measured: median of 3 writes of %.2f MB (weights + optimizer state) with fsync in %s",
                static_cast<double>(bytes) / 1e6, folder.c_str());
  in.checkpoint_how = buf;

  const CostEstimate e = estimate_cost(in);
  if (json_out)
    std::cout << estimate_json(in, e, projected).dump(2) << "\n";
  else
    print_estimate(in, e);
  return 0;
}

int cmd_prices(bool json_out) {
  const PriceCatalog catalog = PriceCatalog::load(PriceCatalog::default_path());
  if (json_out) {
    json out = json::array();
    for (const InstancePrice& p : catalog.instances()) {
      json h = json::array();
      for (const PastPrice& past : p.history) {
        json j{{"date", past.date}, {"source", past.source}};
        if (past.on_demand_usd_per_hour >= 0)
          j["on_demand_usd_per_hour"] = past.on_demand_usd_per_hour;
        if (past.spot_usd_per_hour >= 0)
          j["spot_usd_per_hour"] = past.spot_usd_per_hour;
        h.push_back(j);
      }
      out.push_back({{"name", p.name},
                     {"gpus", p.gpus},
                     {"gpu_model", p.gpu_model},
                     {"on_demand_usd_per_hour", p.on_demand_usd_per_hour},
                     {"spot_usd_per_hour", p.spot_usd_per_hour},
                     {"price_date", p.price_date},
                     {"source", p.source},
                     {"spot_source", p.spot_source},
                     {"peak_fp32_tflops", p.peak_flops("fp32") / 1e12},
                     {"history", h}});
    }
    std::cout << json{{"catalog", catalog.path()}, {"instances", out}}.dump(2) << "\n";
    return 0;
  }
  std::cout << "price catalog " << catalog.path() << " (USD per instance-hour)\n";
  for (const InstancePrice& p : catalog.instances()) {
    std::cout << "\n"
              << p.name << (p.gpus ? "  " + std::to_string(p.gpus) + " x " + p.gpu_model : std::string())
              << "\n  on-demand " << money(p.on_demand_usd_per_hour) << "/h, spot " << money(p.spot_usd_per_hour)
              << "/h  (" << p.price_date << ")\n  on-demand: " << p.source << "\n  spot: " << p.spot_source << "\n";
    for (const PastPrice& past : p.history) {
      std::cout << "  earlier figure (" << past.date << "):";
      if (past.on_demand_usd_per_hour >= 0)
        std::cout << " on-demand " << money(past.on_demand_usd_per_hour) << "/h";
      if (past.spot_usd_per_hour >= 0)
        std::cout << " spot " << money(past.spot_usd_per_hour) << "/h";
      std::cout << "  (" << past.source << ")\n";
    }
  }
  return 0;
}

}  // namespace

void add_cost_commands(CLI::App& app, const std::string& db_path, int& exit_code) {
  auto target = std::make_shared<std::string>();
  auto sets = std::make_shared<std::vector<std::string>>();
  auto instance = std::make_shared<std::string>();
  auto lambda = std::make_shared<double>(0);
  auto restart = std::make_shared<double>(300);
  auto steps = std::make_shared<int>(30);
  auto json_out = std::make_shared<bool>(false);
  CLI::App* cost = app.add_subcommand(
      "cost", "Expected wall time and dollars on-demand and on spot, with the recommended checkpoint interval");
  cost->add_option("target", *target, "An experiment JSON (timed here for --steps steps) or a recorded run")
      ->required();
  cost->add_option("--set", *sets, "Override a config value (repeatable)");
  cost->add_option("--instance", *instance, "Instance from the price catalog (default: the config's cost.instance)");
  cost->add_option("--interruptions-per-hour", *lambda, "Spot interruptions per hour (lambda)")->capture_default_str();
  cost->add_option("--restart-s", *restart, "Seconds from an interruption until the work goes on again")
      ->capture_default_str();
  cost->add_option("--steps", *steps, "Training steps to time for a config")->capture_default_str();
  cost->add_flag("--json", *json_out, "Print the estimate as JSON");
  cost->callback([=, &db_path, &exit_code] {
    exit_code = cmd_cost(db_path, *target, *sets, *instance, *lambda, *restart, *steps, *json_out);
  });

  auto prices_json = std::make_shared<bool>(false);
  CLI::App* prices = app.add_subcommand("prices", "List the price catalog: prices, their dates and sources");
  prices->add_flag("--json", *prices_json, "Print the catalog as JSON");
  prices->callback([=, &exit_code] { exit_code = cmd_prices(*prices_json); });
}

}  // namespace lathe::cli
