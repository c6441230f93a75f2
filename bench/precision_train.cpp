// Mixed-precision training speed against f32, measured in one process: forward + backward + SGD step
// of the zoo models at f32, bf16 and f16 (f16 with the loss scaler's unscale-and-check), the
// precisions interleaved round by round so machine load hits all alike; median of the rounds.
// Each line says whether the low precision ran on native kernels or was EMULATED (values rounded,
// f32 arithmetic): an emulated ratio is the cost of the emulation, not bf16 speed.
//   precision_train [--models mlp,cnn] [--precisions f32,bf16,f16] [--steps 30] [--rounds 3] [--batch 128]
//                   [--threads N] [--backend cpu] [--synthetic 1]
// --synthetic 1: random images and labels instead of Fashion-MNIST (a machine without the dataset,
// such as a lent GPU; speed does not depend on the pixel values).
// (speed_vs_f32 needs f32 in --precisions; leaving it out serves profiling one precision alone.)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/compress/precision/loss_scaler.h"
#include "engine/core/rng.h"
#include "engine/core/timing.h"
#include "engine/data/dataset.h"
#include "engine/data/loader.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/zoo.h"
#include "engine/run/stage_precision.h"
#include "engine/exec/batch_loop.h"

#ifdef LATHE_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

using namespace lathe;

int main(int argc, char** argv) {
#ifdef LATHE_HAVE_CUDA
  cuda::register_backend();
#endif
  std::string models = "mlp,cnn", backend_name = "cpu", precision_list = "f32,bf16,f16";
  int steps = 30, rounds = 3, batch = 128, threads = 0;
  bool synthetic = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--models")
      models = v;
    else if (a == "--precisions")
      precision_list = v;
    else if (a == "--steps")
      steps = std::stoi(v);
    else if (a == "--rounds")
      rounds = std::stoi(v);
    else if (a == "--batch")
      batch = std::stoi(v);
    else if (a == "--threads")
      threads = std::stoi(v);
    else if (a == "--backend")
      backend_name = v;
    else if (a == "--synthetic")
      synthetic = v != "0";
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
    std::vector<Batch> host_batches;
    if (synthetic) {
      Rng rng(1);
      for (int i = 0; i < 20; ++i) {
        Batch b{Tensor::empty({batch, 1, 28, 28}, DType::f32), Tensor::empty({batch}, DType::s32), i};
        for (int64_t k = 0; k < b.images.numel(); ++k) {  // half black, like the garments' backgrounds
          const double pixel = rng.uniform() < 0.5 ? 0.0 : rng.uniform();
          b.images.set_flat(k, (pixel - 0.2860) / 0.3530);
        }
        for (int64_t k = 0; k < batch; ++k)
          b.labels.set_flat(k, static_cast<double>(rng.below(10)));
        host_batches.push_back(b);
      }
    } else {
      const TrainTest data = load_fashion_mnist();
      LoaderOptions lo;
      lo.batch_size = batch;
      lo.drop_last = true;
      DataLoader loader(data.train, lo);
      loader.start_epoch(0);
      for (int i = 0; i < 20; ++i) {
        Batch b;
        if (!loader.next(b))
          break;
        b.images = b.images.contiguous_copy();  // past the loader's buffer reuse
        b.labels = b.labels.contiguous_copy();
        host_batches.push_back(b);
      }
    }
    std::vector<DeviceBatch> batches;
    for (const Batch& b : host_batches) {
      DeviceBatch d;
      d.load(*backend, b);
      batches.push_back(d);
    }
    std::vector<DType> precisions;
    {
      std::stringstream plist(precision_list);
      std::string p;
      while (std::getline(plist, p, ','))
        precisions.push_back(dtype_from_name(p));
    }
    std::stringstream list(models);
    std::string name;
    while (std::getline(list, name, ',')) {
      struct Runner {
        std::unique_ptr<Model> model;
        std::unique_ptr<Sgd> sgd;
        std::unique_ptr<LossScaler> scaler;
        Tensor diff;
        int64_t it = 0;
        std::vector<double> rates;
      };
      std::map<DType, Runner> runners;
      for (DType p : precisions) {
        Runner& r = runners[p];
        r.model = build_zoo_model(name);
        Rng rng(0);
        r.model->create_params(*backend, DType::f32, rng);
        r.model->set_compute_precision(p);
        r.sgd = std::make_unique<Sgd>(0.9, 0.0, false);
        if (p == DType::f16)
          r.scaler = std::make_unique<LossScaler>();
      }
      auto run_steps = [&](Runner& r, int n) {
        auto params = r.model->named_params();
        for (int s = 0; s < n; ++s, ++r.it) {
          const DeviceBatch& b = batches[r.it % batches.size()];
          LayerContext ctx{*backend, true, static_cast<uint64_t>(r.it)};
          const double scale = r.scaler ? r.scaler->scale() : 1.0;
          forward_backward(*r.model, ctx, b.images, b.labels, scale / batch, r.diff);
          if (!r.scaler || r.scaler->unscale_and_update(*backend, params))
            r.sgd->step(*backend, params, 0.01);
        }
        backend->synchronize();
      };
      for (DType p : precisions)
        run_steps(runners[p], 3);  // warm-up: primitive creation, buffers
      for (int round = 0; round < rounds; ++round)
        for (DType p : precisions) {
          Runner& r = runners[p];
          const auto t0 = std::chrono::steady_clock::now();
          run_steps(r, steps);
          const double s = seconds_since(t0);
          r.rates.push_back(static_cast<double>(steps) * batch / s);
        }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      const bool have_f32 = runners.count(DType::f32) > 0;
      const double f32_rate = have_f32 ? median(runners[DType::f32].rates) : 0.0;
      for (DType p : precisions) {
        Runner& r = runners[p];
        const double rate = median(r.rates);
        nlohmann::json j{{"bench", "precision_train"},
                         {"model", name},
                         {"precision", std::string(dtype_name(p))},
                         {"batch", batch},
                         {"threads", threads},
                         {"backend", backend->name()},
                         {"device", backend->device_name()},
                         {"data", synthetic ? "synthetic" : "fashion-mnist"},
                         {"samples_per_s", rate},
                         {"samples_per_s_rounds", r.rates},
                         {"speed_vs_f32", have_f32 ? nlohmann::json(rate / f32_rate) : nlohmann::json()}};
        if (p != DType::f32) {
          const nlohmann::json path = precision_path(*backend, p);
          j["path"] = path;
          j["emulated"] = path["linear"] != "native" || path["conv2d"] != "native";
          if (r.scaler)
            j["loss_scale_end"] = r.scaler->scale();
        }
        std::cout << j.dump() << std::endl;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "precision_train: %s\n", e.what());
    return 2;
  }
  return 0;
}
