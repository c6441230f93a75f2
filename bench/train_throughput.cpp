// Training throughput of the zoo models on the CPU backend: forward + backward + SGD step on
// pre-loaded Fashion-MNIST batches (the same protocol as bench/peers/torch_train.py), median of 3
// timed repeats after a warm-up. --precision bf16 computes the matmuls in bf16 with f32 master
// weights (Model::set_compute_precision, what PyTorch's bf16 autocast does). Prints one JSON line per
// model with samples/s and MFU (at most 1) against the peak for the data type the matmuls run at
// (cpu_peak_flops: this run's measurement or the best recorded here, raised to what the run achieved).
//   train_throughput [--models mlp,cnn] [--steps 200] [--warmup 20] [--batch 128] [--threads N]
//                    [--precision f32|bf16] [--backend cpu]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/core/timing.h"
#include "engine/data/dataset.h"
#include "engine/data/loader.h"
#include "engine/exec/batch_loop.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/zoo.h"
#include "engine/run/stage_precision.h"
#include "engine/run/telemetry.h"

#ifdef LATHE_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

using namespace lathe;

int main(int argc, char** argv) {
#ifdef LATHE_HAVE_CUDA
  cuda::register_backend();
#endif
  std::string models = "mlp,cnn", backend_name = "cpu", precision_name = "f32";
  int steps = 200, warmup = 20, batch = 128, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--models")
      models = v;
    else if (a == "--steps")
      steps = std::stoi(v);
    else if (a == "--warmup")
      warmup = std::stoi(v);
    else if (a == "--batch")
      batch = std::stoi(v);
    else if (a == "--threads")
      threads = std::stoi(v);
    else if (a == "--precision")
      precision_name = v;
    else if (a == "--backend")
      backend_name = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (threads > 0)
    omp_set_num_threads(threads);
  threads = omp_get_max_threads();
  try {
    auto backend = make_backend(backend_name);
    const TrainTest data = load_fashion_mnist();
    const DType precision = dtype_from_name(precision_name);
    if (precision != DType::f32 && precision != DType::bf16)
      throw ConfigError("--precision " + precision_name + " (allowed: f32, bf16)");
    // The peak of the type the matmuls really run at, by the trainer's rule: bf16 only where the
    // backend has native bf16 kernels (a CPU without AVX-512 bf16 emulates it, computing in f32).
    const DType peak_type = matmul_dtype(*backend, precision);
    const bool native = peak_type == precision;
    PeakFlops peak = cpu_peak_flops(threads, peak_type);

    // Pre-load enough batches (as the PyTorch script does) so data preparation is not timed.
    LoaderOptions lo;
    lo.batch_size = batch;
    lo.drop_last = true;
    DataLoader loader(data.train, lo);
    loader.start_epoch(0);
    std::vector<Batch> batches;
    for (int i = 0; i < 50; ++i) {
      Batch b;
      if (!loader.next(b))
        break;
      if (!backend->device().is_cpu()) {
        Batch d;
        d.images = backend->empty(b.images.shape(), b.images.dtype());
        d.labels = backend->empty(b.labels.shape(), b.labels.dtype());
        backend->copy(b.images, d.images);
        backend->copy(b.labels, d.labels);
        b = d;
      }
      batches.push_back(b);
    }

    std::stringstream list(models);
    std::string name;
    while (std::getline(list, name, ',')) {
      auto model = build_zoo_model(name);
      Rng rng(0);
      model->create_params(*backend, DType::f32, rng);
      model->set_compute_precision(precision);
      Sgd sgd(0.9, 0.0, false);
      const double lr = (name == "mlp" || name == "student") ? 0.05 : 0.02;
      auto params = model->named_params();
      Tensor diff;
      int64_t it = 0;
      auto run_steps = [&](int n) {
        for (int s = 0; s < n; ++s, ++it) {
          const Batch& b = batches[it % batches.size()];
          LayerContext ctx{*backend, true, static_cast<uint64_t>(it)};
          forward_backward(*model, ctx, b.images, b.labels, 1.0 / batch, diff);
          sgd.step(*backend, params, lr);
        }
        backend->synchronize();
      };
      run_steps(warmup);
      std::vector<double> rates;
      for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        run_steps(steps);
        const double s = seconds_since(t0);
        rates.push_back(static_cast<double>(steps) * batch / s);
      }
      std::sort(rates.begin(), rates.end());
      const double sps = rates[1];
      const double train_flops = 3.0 * static_cast<double>(model->flops_per_sample());
      peak = raise_peak_to_achieved(peak, sps * train_flops, threads, peak_type);
      nlohmann::json j{{"peer", "lathe"},
                       {"model", name},
                       {"batch", batch},
                       {"threads", threads},
                       {"precision", precision_name},
                       {"matmuls", native ? "native" : "emulated (bf16 rounding, f32 arithmetic)"},
                       {"backend", backend->name()},
                       {"device", backend->device_name()},
                       {"samples_per_s", sps},
                       {"samples_per_s_runs", rates},
                       {"train_gflop_per_s", sps * train_flops / 1e9},
                       {"mfu", mfu_fraction(sps * train_flops, peak.flops_per_s)},
                       {"peak_gflop_per_s", peak.flops_per_s / 1e9},
                       {"peak_how", peak.how}};
      std::cout << j.dump() << std::endl;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_throughput: %s\n", e.what());
    return 2;
  }
  return 0;
}
