// Where the time goes, layer by layer, against the peak of each data type: the INT8 cnn inference
// (Int8Model's per-step profile: quantize, int8 conv/linear with the requantization fused, int8
// max-pool, flatten), and the f32 and bf16 training steps (every node's forward and backward timed
// through TimedLayer, plus the loss, the SGD step and what lies between the layers). Each row: time,
// MACs or FLOPs, achieved rate and the fraction of the peak for the data type the matmuls run at.
// Peaks: cpu_peak_flops(threads, dtype), the best of this run's measurement and the one recorded for
// this CPU model and thread count, raised to any rate a layer achieved here (never below a run).
// The machine's load while measuring (LoadMeter: other processes' CPU share) is printed with it.
// --clock thread-cpu times the training steps on the calling thread's CPU clock instead of the wall
// (with --threads 1 that is the work itself, so a loaded machine can be read); --kernels
// lathe,onednn profiles each training part twice in this process, with the cpu backend's own
// kernels (pooling, first conv) and with oneDNN's primitives for every op, and prints the ratio.
//   profile_layers [--model cnn] [--int8-batch 256] [--train-batch 128] [--reps 20] [--threads N]
//                  [--parts int8,f32,bf16] [--weights runs/<id>/model.safetensors]
//                  [--clock wall|thread-cpu] [--kernels lathe|onednn|lathe,onednn]
// Prints markdown tables, then one JSON line with every figure.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/compress/quant/calibration_set.h"
#include "engine/compress/quant/int8_model.h"
#include "engine/core/timing.h"
#include "engine/data/dataset.h"
#include "engine/data/loader.h"
#include "engine/exec/batch_loop.h"
#include "engine/nn/model_io.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/timed_layer.h"
#include "engine/nn/zoo.h"
#include "engine/run/telemetry.h"

using namespace lathe;

namespace {

using Clock = std::chrono::steady_clock;

Batch first_batch(const Dataset& d, int64_t n, int64_t offset = 0) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i)
    ids.push_back((offset + i) % d.count);
  const Dataset part = gather(d, ids);
  LoaderOptions lo;
  lo.batch_size = n;
  lo.shuffle = false;
  DataLoader loader(part, lo);
  loader.start_epoch(0);
  Batch b;
  loader.next(b);
  return b;
}

std::string fmt(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// Forward FLOPs per sample of each node, by name (2 x multiply-adds).
std::map<std::string, int64_t> node_flops(const Model& m) {
  std::map<std::string, int64_t> f;
  for (const LayerInfo& i : m.layer_infos())
    f[i.name] = i.flops;
  return f;
}

/// "12.3%" of `peak`, or "n/a" where the CPU has no peak for the data type (no oneDNN matmul for it).
std::string pct_of(double rate, double peak) { return peak > 0 ? fmt(100 * mfu_fraction(rate, peak), 1) + "%" : "n/a"; }
/// The fraction for the JSON line: null where there is no peak.
nlohmann::json fraction_of(double rate, double peak) {
  return peak > 0 ? nlohmann::json(mfu_fraction(rate, peak)) : nlohmann::json();
}

struct Peaks {
  std::map<std::string, PeakFlops> by_dtype;  // "f32", "bf16", "int8"
  std::map<std::string, PeakFlops> measured;  // before any raise
  int threads = 1;

  PeakFlops& get(const std::string& dt) { return by_dtype.at(dt); }
  /// Never below what this run achieved; a peak this CPU has none of (0) stays none.
  void raise(const std::string& dt, double achieved) {
    if (!(by_dtype.at(dt).flops_per_s > 0))
      return;
    const DType d = dt == "int8" ? DType::s8 : dtype_from_name(dt);
    by_dtype[dt] = raise_peak_to_achieved(by_dtype.at(dt), achieved, threads, d);
  }
};

// ---------------------------------------------------------------- INT8 inference

nlohmann::json profile_int8(Model& model, Backend& be, const TrainTest& data, int64_t batch, int reps, Peaks& peaks) {
  std::vector<int64_t> idx(512);
  for (int64_t i = 0; i < 512; ++i)
    idx[i] = i * 97 % data.train.count;
  const ActivationStats stats = collect_activation_stats(model, be, gather(data.train, idx), 64);
  Int8Model q(model, be, derive_activation_params(stats, CalibrationMethod::minmax));
  const Tensor x = first_batch(data.test, batch).images;
  for (int w = 0; w < 3; ++w)
    q.forward(x);
  std::vector<double> totals;
  q.set_profiling(true);
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    q.forward(x);
    totals.push_back(seconds_since(t0));
  }
  q.set_profiling(false);
  const double total_s = std::accumulate(totals.begin(), totals.end(), 0.0) / reps;
  const std::map<std::string, int64_t> flops = node_flops(model);

  nlohmann::json rows = nlohmann::json::array();
  double steps_s = 0, best_rate = 0;
  for (const auto& s : q.steps()) {
    const double sec = s->seconds / reps;
    steps_s += sec;
    nlohmann::json row{{"step", s->text}, {"ms", 1000 * sec}};
    if (s->kind == Int8Model::Step::Kind::int8_conv || s->kind == Int8Model::Step::Kind::int8_linear) {
      const double ops = static_cast<double>(flops.at(s->node)) * static_cast<double>(batch);
      row["macs"] = ops / 2;
      row["gops_per_s"] = ops / sec / 1e9;
      row["kernel"] = s->kernel->implementation();
      best_rate = std::max(best_rate, ops / sec);
    } else {
      row["pass"] = true;  // a pass between the int8 matmuls: quantize, pool, flatten, dequantize
    }
    rows.push_back(row);
  }
  peaks.raise("int8", best_rate);
  const double peak = peaks.get("int8").flops_per_s;
  for (auto& row : rows)
    if (row.contains("gops_per_s"))
      row["fraction_of_peak"] = fraction_of(row["gops_per_s"].get<double>() * 1e9, peak);
  const double model_ops = static_cast<double>(model.flops_per_sample()) * static_cast<double>(batch);

  std::cout << "\n### INT8 cnn inference, batch " << batch << " (int8 peak " << (peak > 0 ? fmt(peak / 1e9, 0) + " GOP/s" : "n/a") << ")\n\n";
  std::cout << "| step | ms | share | MMACs | GOP/s | of int8 peak |\n|---|---|---|---|---|---|\n";
  for (const auto& row : rows) {
    const double ms = row["ms"].get<double>();
    std::cout << "| " << row["step"].get<std::string>() << " | " << fmt(ms, 3) << " | "
              << fmt(100 * ms / (1000 * total_s), 1) << "% | ";
    if (row.contains("macs"))
      std::cout << fmt(row["macs"].get<double>() / 1e6, 0) << " | " << fmt(row["gops_per_s"].get<double>(), 0) << " | "
                << pct_of(row["gops_per_s"].get<double>() * 1e9, peak) << " |\n";
    else
      std::cout << "- | - | - |\n";
  }
  const double outside = std::max(0.0, total_s - steps_s);
  std::cout << "| (outside the steps: dispatch, allocation) | " << fmt(1000 * outside, 3) << " | "
            << fmt(100 * outside / total_s, 1) << "% | | | |\n";
  std::cout << "| **whole forward** | " << fmt(1000 * total_s, 3) << " | 100% | " << fmt(model_ops / 2e6, 0) << " | "
            << fmt(model_ops / total_s / 1e9, 0) << " | " << pct_of(model_ops / total_s, peak) << " |\n";
  return {{"batch", batch},
          {"reps", reps},
          {"ms_per_batch", 1000 * total_s},
          {"samples_per_s", batch / total_s},
          {"gops_per_s", model_ops / total_s / 1e9},
          {"fraction_of_peak", fraction_of(model_ops / total_s, peak)},
          {"outside_steps_ms", 1000 * outside},
          {"steps", rows}};
}

// ---------------------------------------------------------------- training steps

nlohmann::json profile_training(const std::string& model_name, Backend& be, const TrainTest& data, DType precision,
                                int64_t batch, int reps, Peaks& peaks, LayerClock clock, const std::string& label) {
  auto model = build_zoo_model(model_name);
  Rng rng(0);
  model->create_params(be, DType::f32, rng);
  model->set_compute_precision(precision);
  std::vector<TimedLayer*> timed = time_every_layer(*model, clock);
  Sgd sgd(0.9, 0.0, false);
  auto params = model->named_params();
  std::vector<Batch> batches;
  for (int i = 0; i < 8; ++i)
    batches.push_back(first_batch(data.train, batch, i * batch));
  Tensor diff;
  double fwd_s = 0, loss_s = 0, bwd_s = 0, sgd_s = 0;
  auto step = [&](int64_t it, bool timing) {
    const Batch& b = batches[it % batches.size()];
    LayerContext ctx{be, true, static_cast<uint64_t>(it)};
    auto now = [&] { return layer_clock_seconds(clock); };
    double t = now();
    const Tensor& logits = model->forward(ctx, b.images);
    if (timing)
      fwd_s += now() - t;
    t = now();
    if (!diff.defined() || diff.shape() != logits.shape())
      diff = be.empty(logits.shape(), logits.dtype());
    be.softmax_cross_entropy(logits, b.labels, &diff, 1.0 / batch);
    if (timing)
      loss_s += now() - t;
    t = now();
    model->backward(ctx, diff);
    if (timing)
      bwd_s += now() - t;
    t = now();
    sgd.step(be, params, 0.01);
    be.synchronize();
    if (timing)
      sgd_s += now() - t;
  };
  for (int64_t it = 0; it < 5; ++it)
    step(it, false);
  for (TimedLayer* t : timed)
    t->reset();
  for (int64_t it = 0; it < reps; ++it)
    step(it, true);

  const std::string dt = precision == DType::bf16 ? "bf16" : "f32";
  const std::map<std::string, int64_t> flops = node_flops(*model);
  struct Row {
    std::string node, what;
    double fwd_ms, bwd_ms, gflop;
  };
  std::vector<Row> rows;
  double layers_fwd = 0, layers_bwd = 0, best_rate = 0;
  for (size_t i = 0; i < model->size(); ++i) {
    TimedLayer& t = *timed[i];
    const double f = t.forward_seconds() / reps, b = t.backward_seconds() / reps;
    layers_fwd += f;
    layers_bwd += b;
    const bool fused_away = t.forward_calls() == 0;
    // Backward of a matmul layer: the weight gradient, and the input gradient unless the input is
    // the model's (no gradient there): 2x or 1x the forward FLOPs.
    const bool first = model->node_inputs(i)[0] == Model::kModelInput;
    const double fwd_flops = static_cast<double>(flops.at(model->node_name(i))) * static_cast<double>(batch);
    const double all = fwd_flops * (first ? 2.0 : 3.0);
    const bool folded = model->relu_backward_folded(i);
    rows.push_back({model->node_name(i),
                    t.describe() + (fused_away && folded ? " (forward fused into the layer before, backward into the "
                                                           "pooling after)"
                                    : fused_away         ? " (forward fused into the layer before)"
                                    : folded             ? " (backward fused into the pooling after)"
                                                         : ""),
                    1000 * f, 1000 * b, all / 1e9});
    if (all > 0 && f + b > 0)
      best_rate = std::max(best_rate, all / (f + b));
  }
  // The calling thread's CPU time understates a layer's time when other threads share its work
  // (a passive wait sleeps through it): only wall time, or one thread, may raise the peak.
  if (clock == LayerClock::wall || peaks.threads == 1)
    peaks.raise(dt, best_rate);
  const double peak = peaks.get(dt).flops_per_s;
  const double step_s = (fwd_s + loss_s + bwd_s + sgd_s) / reps;
  const double train_flops = 3.0 * static_cast<double>(model->flops_per_sample()) * static_cast<double>(batch);

  std::cout << "\n### " << model_name << " training step, " << dt << ", batch " << batch << label << " (" << dt
            << " peak " << (peak > 0 ? fmt(peak / 1e9, 0) + " GFLOP/s" : "n/a") << ")\n\n";
  std::cout << "| node | layer | fwd ms | bwd ms | share | GFLOP | GFLOP/s | of " << dt
            << " peak |\n|---|---|---|---|---|---|---|---|\n";
  nlohmann::json jrows = nlohmann::json::array();
  for (const Row& r : rows) {
    const double ms = r.fwd_ms + r.bwd_ms;
    const double rate = ms > 0 ? r.gflop / (ms / 1000) : 0;
    std::cout << "| " << r.node << " | " << r.what << " | " << fmt(r.fwd_ms, 3) << " | " << fmt(r.bwd_ms, 3) << " | "
              << fmt(100 * ms / (1000 * step_s), 1) << "% | ";
    if (r.gflop > 0)
      std::cout << fmt(r.gflop, 3) << " | " << fmt(rate, 0) << " | " << pct_of(rate * 1e9, peak) << " |\n";
    else
      std::cout << "- | - | - |\n";
    jrows.push_back({{"node", r.node},
                     {"layer", r.what},
                     {"fwd_ms", r.fwd_ms},
                     {"bwd_ms", r.bwd_ms},
                     {"gflop", r.gflop},
                     {"gflop_per_s", rate},
                     {"fraction_of_peak", fraction_of(rate * 1e9, peak)}});
  }
  const double between_f = std::max(0.0, fwd_s / reps - layers_fwd),
               between_b = std::max(0.0, bwd_s / reps - layers_bwd);
  auto pass = [&](const std::string& what, double f_s, double b_s) {
    std::cout << "| | " << what << " | " << fmt(1000 * f_s, 3) << " | " << fmt(1000 * b_s, 3) << " | "
              << fmt(100 * (f_s + b_s) / step_s, 1) << "% | - | - | - |\n";
    jrows.push_back({{"pass", what}, {"fwd_ms", 1000 * f_s}, {"bwd_ms", 1000 * b_s}});
  };
  pass("between layers (model bookkeeping, buffer checks)", between_f, between_b);
  pass("softmax cross-entropy", loss_s / reps, 0);
  pass("SGD step (momentum)", sgd_s / reps, 0);
  std::cout << "| **whole step** | | " << fmt(1000 * (fwd_s + loss_s) / reps, 3) << " | "
            << fmt(1000 * (bwd_s + sgd_s) / reps, 3) << " | 100% | " << fmt(train_flops / 1e9, 3) << " | "
            << fmt(train_flops / step_s / 1e9, 0) << " | " << pct_of(train_flops / step_s, peak) << " |\n";
  return {{"model", model_name},
          {"precision", dt},
          {"clock", clock == LayerClock::thread_cpu ? "thread-cpu" : "wall"},
          {"batch", batch},
          {"reps", reps},
          {"step_ms", 1000 * step_s},
          {"samples_per_s", batch / step_s},
          {"gflop_per_s", train_flops / step_s / 1e9},
          {"fraction_of_peak", fraction_of(train_flops / step_s, peak)},
          {"rows", jrows}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "cnn", weights, parts = "int8,f32,bf16", clock_name = "wall", kernels = "lathe";
  int64_t int8_batch = 256, train_batch = 128;
  int reps = 20, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model")
      model_name = v;
    else if (a == "--weights")
      weights = v;
    else if (a == "--parts")
      parts = v;
    else if (a == "--int8-batch")
      int8_batch = std::stoll(v);
    else if (a == "--train-batch")
      train_batch = std::stoll(v);
    else if (a == "--reps")
      reps = std::stoi(v);
    else if (a == "--threads")
      threads = std::stoi(v);
    else if (a == "--clock")
      clock_name = v;
    else if (a == "--kernels")
      kernels = v;
    else {
      std::fprintf(stderr,
                   "unknown option %s (allowed: --model --weights --parts --int8-batch --train-batch "
                   "--reps --threads --clock --kernels)\n",
                   a.c_str());
      return 2;
    }
  }
  if (threads > 0)
    omp_set_num_threads(threads);
  threads = omp_get_max_threads();
  try {
    if (clock_name != "wall" && clock_name != "thread-cpu")
      throw ConfigError("--clock: unknown clock '" + clock_name + "' (allowed: wall, thread-cpu)");
    const LayerClock clock = clock_name == "thread-cpu" ? LayerClock::thread_cpu : LayerClock::wall;
    std::vector<std::string> kernel_sets;
    {
      std::stringstream ks(kernels);
      for (std::string k; std::getline(ks, k, ',');) {
        if (k != "lathe" && k != "onednn")
          throw ConfigError("--kernels: unknown kernel set '" + k + "' (allowed: lathe, onednn)");
        kernel_sets.push_back(k);
      }
    }
    const LoadMeter load;
    auto be = make_backend("cpu");
    auto* dnnl = dynamic_cast<DnnlBackend*>(be.get());
    const TrainTest data = load_fashion_mnist();
    Peaks peaks;
    peaks.threads = threads;
    for (const auto& [name, d] : {std::pair{"f32", DType::f32}, {"bf16", DType::bf16}, {"int8", DType::s8}}) {
      try {
        peaks.by_dtype[name] = cpu_peak_flops(threads, d);        // this run's or the best recorded here
        peaks.measured[name] = measure_cpu_peak_ops(threads, d);  // a second try: load comes and goes
      } catch (const Error& e) {
        // No oneDNN matmul for the type on this CPU (bf16 before AVX-512 BF16 / AMX): no peak, and
        // the rows say n/a instead of a fraction of an invented one.
        peaks.by_dtype[name] = peaks.measured[name] = PeakFlops{0, std::string("unavailable: ") + e.what()};
        continue;
      }
      peaks.raise(name, peaks.measured[name].flops_per_s);
    }
    nlohmann::json out{{"bench", "profile_layers"}, {"device", be->device_name()}, {"threads", threads}};
    std::cout << "## Per-layer profile on " << be->device_name() << ", " << threads << " thread(s)\n";
    std::stringstream list(parts);
    for (std::string part; std::getline(list, part, ',');) {
      if (part == "int8") {
        auto model = build_zoo_model(model_name);
        Rng rng(0);
        model->create_params(*be, DType::f32, rng);
        if (!weights.empty())
          load_model_weights(*model, *be, weights);
        out["int8"] = profile_int8(*model, *be, data, int8_batch, reps, peaks);
      } else if (part == "f32" || part == "bf16") {
        std::map<std::string, double> step_ms;
        for (const std::string& k : kernel_sets) {
          LATHE_CHECK(dnnl || k == "lathe", "--kernels onednn needs the cpu backend");
          if (dnnl)
            dnnl->set_own_kernels(k == "lathe");
          const std::string key = k == "lathe" ? part : part + "_onednn";
          const std::string label =
              (kernel_sets.size() > 1 ? (k == "lathe" ? ", Lathe's kernels" : ", oneDNN's kernels only") : "") +
              std::string(clock == LayerClock::thread_cpu ? ", thread CPU time" : "");
          out[key] =
              profile_training(model_name, *be, data, dtype_from_name(part), train_batch, reps, peaks, clock, label);
          step_ms[k] = out[key]["step_ms"].get<double>();
        }
        if (dnnl)
          dnnl->set_own_kernels(true);
        if (step_ms.size() == 2) {
          const double ratio = step_ms["onednn"] / step_ms["lathe"];
          std::cout << "\n"
                    << part << " step: " << fmt(step_ms["onednn"], 3) << " ms with oneDNN's kernels only, "
                    << fmt(step_ms["lathe"], 3) << " ms with Lathe's: " << fmt(ratio, 2) << "x\n";
          out[part + "_own_kernels_speedup"] = ratio;
        }
      } else {
        throw ConfigError("--parts: unknown part '" + part + "' (allowed: int8, f32, bf16)");
      }
    }
    const double others = load.others_share();
    std::cout << "\nPeaks (ops/s):\n";
    for (const auto& [name, p] : peaks.by_dtype) {
      std::cout << "- " << name << ": " << fmt(p.flops_per_s / 1e9, 0) << " G (" << p.how << "); this run measured "
                << fmt(peaks.measured[name].flops_per_s / 1e9, 0) << " G\n";
      out["peaks"][name] = {
          {"ops_per_s", p.flops_per_s}, {"how", p.how}, {"measured_now_ops_per_s", peaks.measured[name].flops_per_s}};
    }
    std::cout << "Machine load while measuring: other processes used " << fmt(100 * others, 0) << "% of the CPUs"
              << (others > kContendedShare ? " (CONTENDED: times are inflated)" : "") << "\n";
    out["others_cpu_share"] = others;
    out["contended"] = others > kContendedShare;
    std::cout << out.dump() << std::endl;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "profile_layers: %s\n", e.what());
    return 2;
  }
  return 0;
}
