// INT8 inference throughput of a zoo model (default cnn) against Lathe's own f32 forward, measured
// alternately in one process on the same Fashion-MNIST test batches: median of repeated timed
// passes at each batch size, the ratio int8/f32, and where the INT8 time goes (per plan step).
// Weights: random (PyTorch init) unless --weights names a trained model.safetensors (accuracy is
// printed then too). Calibration: minmax over 512 training images (the timing does not depend on
// the method).
//   int8_cnn [--model cnn] [--weights runs/<id>/model.safetensors] [--batches 1,256] [--reps 20]
#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/compress/quant/calibration_set.h"
#include "engine/backend/cpu/int8_cpu.h"
#include "engine/core/timing.h"
#include "engine/data/dataset.h"
#include "engine/data/loader.h"
#include "engine/nn/model_io.h"
#include "engine/nn/zoo.h"
#include "engine/exec/batch_loop.h"

using namespace lathe;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename Fn>
double time_once(Fn&& fn) {
  const auto t = std::chrono::steady_clock::now();
  fn();
  return seconds_since(t);
}

Tensor first_batch(const Dataset& d, int64_t n) {
  LoaderOptions lo;
  lo.batch_size = n;
  lo.shuffle = false;
  DataLoader loader(d, lo);
  loader.start_epoch(0);
  Batch b;
  loader.next(b);
  return b.images;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "cnn", weights, batches_arg = "1,256";
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model")
      model_name = v;
    else if (a == "--weights")
      weights = v;
    else if (a == "--batches")
      batches_arg = v;
    else if (a == "--reps")
      reps = std::stoi(v);
    else {
      std::cerr << "unknown option " << a << "\n";
      return 2;
    }
  }
  std::vector<int64_t> batches;
  std::stringstream ss(batches_arg);
  for (std::string t; std::getline(ss, t, ',');)
    batches.push_back(std::stoll(t));

  auto be = make_backend("cpu");
  const TrainTest data = load_fashion_mnist();
  auto model = build_zoo_model(model_name);
  Rng rng(0);
  model->create_params(*be, DType::f32, rng);
  if (!weights.empty())
    load_model_weights(*model, *be, weights);
  std::vector<int64_t> idx(512);
  for (int64_t i = 0; i < 512; ++i)
    idx[i] = i * 97 % data.train.count;
  const ActivationStats stats = collect_activation_stats(*model, *be, gather(data.train, idx), 64);
  Int8Model q(*model, *be, derive_activation_params(stats, CalibrationMethod::minmax));
  LayerContext ctx{*be, false, 0};

  nlohmann::json out;
  out["what"] = "inference samples/s, Lathe f32 forward vs Lathe INT8 (oneDNN int8), same process, alternating";
  out["model"] = model_name;
  out["device"] = be->device_name();
  out["cpu_isa"] = cpu_int8_isa_name();
  out["weight_bits"] = q.weight_bits();
  if (!weights.empty()) {
    const EvalResult f = evaluate(*model, *be, data.test, 500);
    int64_t correct = 0;
    for (int64_t s = 0; s < data.test.count; s += 500) {
      std::vector<int64_t> ids;
      for (int64_t i = s; i < std::min<int64_t>(s + 500, data.test.count); ++i)
        ids.push_back(i);
      const Dataset part = gather(data.test, ids);
      const Tensor y = q.forward(first_batch(part, part.count));
      for (int64_t i = 0; i < part.count; ++i) {
        int64_t best = 0;
        for (int64_t k = 1; k < y.dim(1); ++k)
          if (y.get({i, k}) > y.get({i, best}))
            best = k;
        correct += best == part.labels[i];
      }
    }
    out["f32_test_accuracy"] = f.accuracy;
    out["int8_test_accuracy"] = static_cast<double>(correct) / static_cast<double>(data.test.count);
  }
  for (int64_t b : batches) {
    const Tensor x = first_batch(data.test, b);
    for (int w = 0; w < 3; ++w) {
      model->forward(ctx, x);
      q.forward(x);
    }
    std::vector<double> tf, tq;
    q.set_profiling(true);
    for (int r = 0; r < reps; ++r) {
      tf.push_back(time_once([&] { model->forward(ctx, x); }));
      tq.push_back(time_once([&] { q.forward(x); }));
    }
    q.set_profiling(false);
    const double mf = median(tf), mq = median(tq);
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& [text, sec] : q.profile())
      steps.push_back({{"step", text}, {"ms_per_batch", 1000.0 * sec / reps}});
    out["batch_" + std::to_string(b)] = {{"f32_samples_per_s", b / mf}, {"int8_samples_per_s", b / mq},
                                         {"f32_ms", 1000 * mf},         {"int8_ms", 1000 * mq},
                                         {"int8_over_f32", mf / mq},    {"int8_steps_mean_ms", steps}};
  }
  std::cout << out.dump(1) << "\n";
  return 0;
}
