// Dense (oneDNN) vs sparse (CSR kernels, engine/backend/cpu/spmm.h) latency of pruned layer
// shapes from 5% to 95% weight density, on this CPU, and the crossover density per shape: below it
// the sparse kernel is faster. Both run the layer's full forward (the sparse Linear includes its
// transposes, the sparse conv its im2col); weights are pruned at random positions to the density.
// Time per point: best of repeated runs (at least --reps, ~--ms per point) in one process, so the
// ratio compares like with like.
//   density_sweep [--batch 256] [--reps 5] [--ms 60] [--threads N] [--isa avx512|avx2|scalar] [--json]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/compress/prune/sparse_layers.h"

using namespace lathe;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0)
      return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

struct Shape4 {
  std::string name;  // where the shape comes from
  bool conv;         // conv: in = C, out = OC, hw = input H = W, k = kernel (stride 1, pad k/2)
  int64_t in, out, hw, k;
};

double best_ms(const std::function<void()>& run, int reps, double budget_ms) {
  using Clock = std::chrono::steady_clock;
  run();
  double best = 1e300, total = 0;
  for (int i = 0; i < 1000 && (i < reps || total < budget_ms); ++i) {
    const auto t0 = Clock::now();
    run();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    best = std::min(best, ms);
    total += ms;
  }
  return best;
}

void prune_randomly(Layer& l, double density, Rng& rng) {
  for (Param* p : l.params())
    if (p->name == "weight")
      for (int64_t i = 0; i < p->value.numel(); ++i)
        if (rng.uniform(0, 1) >= density)
          p->value.set_flat(i, 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 256;
  int reps = 5, threads = 0;
  double budget_ms = 60;
  bool json_out = false;
  std::string isa_name;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--batch")
      batch = std::stoll(value());
    else if (a == "--reps")
      reps = std::stoi(value());
    else if (a == "--ms")
      budget_ms = std::stod(value());
    else if (a == "--threads")
      threads = std::stoi(value());
    else if (a == "--isa")
      isa_name = value();
    else if (a == "--json")
      json_out = true;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (threads > 0)
    omp_set_num_threads(threads);
  try {
    SpmmIsa isa = spmm_best_isa();
    if (!isa_name.empty()) {
      const std::vector<SpmmIsa> all = {SpmmIsa::scalar, SpmmIsa::avx2, SpmmIsa::avx512};
      auto it = std::find_if(all.begin(), all.end(), [&](SpmmIsa s) {
        return isa_name == spmm_isa_name(s) || isa_name + "+fma" == spmm_isa_name(s);
      });
      if (it == all.end())
        throw ConfigError("--isa: '" + isa_name + "'; allowed: scalar, avx2, avx512f");
      isa = *it;
    }
    auto be = make_backend("cpu");
    const std::vector<Shape4> shapes = {
        {"mlp.0 linear 784->512", false, 784, 512, 0, 0},
        {"mlp.2 linear 512->256", false, 512, 256, 0, 0},
        {"linear 256->256", false, 256, 256, 0, 0},
        {"cnn.7 linear 3136->128", false, 3136, 128, 0, 0},
        {"cnn.3 conv 32->64 k3 14x14 (GEMM 64x288 . 288x196)", true, 32, 64, 14, 3},
        {"cnn.0 conv 1->32 k3 28x28 (GEMM 32x9 . 9x784)", true, 1, 32, 28, 3},
    };
    std::vector<double> densities;
    for (int d = 5; d <= 95; d += 5)
      densities.push_back(d / 100.0);
    std::printf("density sweep on %s, sparse kernel ISA %s, oneDNN dense, %d threads, batch %lld\n",
                cpu_model().c_str(), spmm_isa_name(isa), omp_get_max_threads(), static_cast<long long>(batch));
    std::printf("(measured: best-of-%d+ ms per forward, same process; ratio = sparse / dense)\n", reps);
    nlohmann::json report = {{"cpu", cpu_model()},
                             {"isa", spmm_isa_name(isa)},
                             {"threads", omp_get_max_threads()},
                             {"batch", batch},
                             {"shapes", nlohmann::json::array()}};
    Rng rng(11);
    LayerContext ctx{*be, false};
    for (const Shape4& s : shapes) {
      std::printf("\n%s\n  density  dense_ms  sparse_ms  ratio\n", s.name.c_str());
      std::vector<double> ratio;
      nlohmann::json rows = nlohmann::json::array();
      for (double d : densities) {
        std::unique_ptr<Layer> dense;
        Tensor x, y_dense, y_sparse;
        if (s.conv) {
          dense = std::make_unique<Conv2d>(s.in, s.out, s.k, 1, s.k / 2);
          x = be->empty({batch, s.in, s.hw, s.hw}, DType::f32, be->preferred_conv_format());
        } else {
          dense = std::make_unique<Linear>(s.in, s.out);
          x = be->empty({batch, s.in}, DType::f32);
        }
        dense->create_params(*be, DType::f32, rng);
        prune_randomly(*dense, d, rng);
        for (int64_t i = 0; i < x.numel(); ++i)
          x.set_flat(i, rng.uniform(-1, 1));
        const Shape out_shape = dense->output_shape({x.shape()});
        y_dense = be->empty(out_shape, DType::f32, dense->output_format(*be, {&x}));
        y_sparse = be->empty(out_shape, DType::f32);
        std::unique_ptr<SparseExecutor> sparse;
        if (s.conv)
          sparse = std::make_unique<SparseConv2d>(static_cast<Conv2d&>(*dense));
        else
          sparse = std::make_unique<SparseLinear>(static_cast<Linear&>(*dense));
        sparse->set_mode(SparseKernelMode::always_sparse);
        sparse->set_isa(isa);
        const double dms = best_ms([&] { dense->forward(ctx, {&x}, y_dense); }, reps, budget_ms);
        const double sms = best_ms([&] { sparse->forward(ctx, {&x}, y_sparse); }, reps, budget_ms);
        ratio.push_back(sms / dms);
        std::printf("  %5.0f%%  %8.3f  %9.3f  %5.2f\n", d * 100, dms, sms, sms / dms);
        rows.push_back(
            {{"density", d}, {"dense_ms", dms}, {"sparse_ms", sms}, {"measured_density", sparse->density()}});
      }
      // Crossover: where ratio first reaches 1 going up in density, interpolated linearly.
      std::string crossover;
      double cross = -1;
      if (ratio[0] >= 1) {
        crossover = "none: dense is faster at every density from 5%";
      } else {
        size_t i = 1;
        while (i < ratio.size() && ratio[i] < 1)
          ++i;
        if (i == ratio.size()) {
          crossover = "above 95%: sparse is faster at every density measured";
          cross = 1.0;
        } else {
          const double d0 = densities[i - 1], d1 = densities[i], r0 = ratio[i - 1], r1 = ratio[i];
          cross = d0 + (1 - r0) / (r1 - r0) * (d1 - d0);
          char buf[128];
          std::snprintf(buf, sizeof buf, "%.1f%% density (%.1f%% sparsity): sparse is faster below it", cross * 100,
                        100 - cross * 100);
          crossover = buf;
        }
      }
      std::printf("  crossover: %s\n", crossover.c_str());
      report["shapes"].push_back(
          {{"shape", s.name}, {"points", rows}, {"crossover_density", cross}, {"crossover", crossover}});
    }
    if (json_out)
      std::printf("%s\n", report.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "density_sweep: %s\n", e.what());
    return 1;
  }
  return 0;
}
