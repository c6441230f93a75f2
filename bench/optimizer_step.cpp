// Optimizer step speed on the CPU backend against the memory bandwidth measured in the same run.
// An optimizer step is a few streams over every parameter (SGD with momentum reads the gradient,
// the weight and the momentum and writes the last two: 5 x 4 bytes per element; AdamW 7; plain SGD
// 3), so what bounds it is the machine's streaming bandwidth at that working set (the mlp's 6 MB of
// weights, gradients and momentum stay in a large L3; 25 M parameters do not). Per model (the zoo's
// parameters, as Optimizer::step sees them, tensor by tensor) or flat size, and per thread count,
// this times a copy of every gradient into a scratch tensor (glibc's memcpy, in the optimizers'
// parallel split: 2 x 4 bytes per element) and each step, in alternating rounds, and prints the
// median time, the bytes the step must move per second and that rate as a fraction of the copy's.
// A loop that stopped vectorizing shows as a fall in that fraction: plain-momentum SGD, scalar under
// gcc 12 until 2026-12-08, moved its bytes at a third of the rate it does vectorized.
//   optimizer_step [--models mlp,cnn,25000000] [--threads 1,2] [--reps 50] [--rounds 3]
// A number in --models is a flat parameter of that many elements. Prints a markdown table, then
// one JSON line with every figure.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/core/timing.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/zoo.h"

using namespace lathe;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty())
      out.push_back(item);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void fill_uniform(Tensor& t, Rng& rng, float scale) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = scale * (2.0f * static_cast<float>(rng.uniform()) - 1.0f);
}

/// The parameters of one row: a zoo model's, or one flat tensor; every gradient set.
struct Subject {
  std::unique_ptr<Model> model;
  std::vector<Param> flat;  // a flat size's one parameter
  std::vector<NamedParam> params;
  int64_t elements = 0;
};

Subject make_subject(Backend& be, const std::string& what) {
  Subject s;
  Rng rng(7);
  if (!what.empty() && std::all_of(what.begin(), what.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const int64_t n = std::stoll(what);
    LATHE_CHECK(n > 0, "--models: a flat size must be positive, got ", what);
    s.flat.resize(1);
    s.flat[0].name = "weight";
    s.flat[0].value = be.empty({n}, DType::f32);
    fill_uniform(s.flat[0].value, rng, 0.1f);
    s.params.push_back({"flat", &s.flat[0]});
  } else {
    s.model = build_zoo_model(what);  // throws, naming the zoo's models, for an unknown one
    s.model->create_params(be, DType::f32, rng);
    s.params = s.model->named_params();
  }
  for (const NamedParam& np : s.params) {
    Param& p = *np.param;
    if (!p.grad.defined() || p.grad.shape() != p.value.shape())
      p.grad = be.empty(p.value.shape(), DType::f32);
    fill_uniform(p.grad, rng, 0.01f);
    s.elements += p.value.numel();
  }
  return s;
}

/// Every gradient copied into `out` (memcpy), each thread a contiguous part as in the optimizers'
/// split (one thread below 65,536 elements, as DnnlBackend's update loops).
void copy_gradients(const std::vector<NamedParam>& params, std::vector<Tensor>& out) {
  for (size_t k = 0; k < params.size(); ++k) {
    const float* g = params[k].param->grad.data<float>();
    float* o = out[k].data<float>();
    const int64_t n = out[k].numel();
#pragma omp parallel if (n > 65536)
    {
      const int64_t parts = omp_get_num_threads(), part = omp_get_thread_num();
      const int64_t lo = n * part / parts, hi = n * (part + 1) / parts;
      std::memcpy(o + lo, g + lo, static_cast<size_t>(hi - lo) * sizeof(float));
    }
  }
}

struct TimedStep {
  std::string name;
  int streams;  // 4-byte reads + writes per element
  std::function<void()> run;
};

}  // namespace

int main(int argc, char** argv) {
  std::string models = "mlp,cnn,25000000", thread_list = "1,2";
  int reps = 50, rounds = 3;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "optimizer_step: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    if (a == "--models")
      models = v;
    else if (a == "--threads")
      thread_list = v;
    else if (a == "--reps")
      reps = std::stoi(v);
    else if (a == "--rounds")
      rounds = std::stoi(v);
    else {
      std::fprintf(stderr, "optimizer_step: unknown option %s (allowed: --models, --threads, --reps, --rounds)\n",
                   a.c_str());
      return 2;
    }
  }
  try {
    LATHE_CHECK(reps >= 1 && rounds >= 1, "--reps and --rounds must be >= 1");
    auto be = make_backend("cpu");
    nlohmann::json out{{"bench", "optimizer_step"}, {"device", be->device_name()}, {"rows", nlohmann::json::array()}};
    std::cout << "## Optimizer steps against a copy's bandwidth on " << be->device_name() << "\n\n"
              << "| parameters | threads | step | ms | GB/s moved | of copy |\n|---|---|---|---|---|---|\n";
    for (const std::string& what : split(models)) {
      Subject s = make_subject(*be, what);
      std::vector<Tensor> scratch;
      for (const NamedParam& np : s.params)
        scratch.push_back(be->empty(np.param->value.shape(), DType::f32));
      Sgd sgd(0.9, 0.0, false), nesterov(0.9, 1e-4, true), plain(0.0, 0.0, false);
      AdamW adamw(0.9, 0.999, 1e-8, 0.01);
      // Tiny learning rates: hundreds of steps leave the values where they started.
      const std::vector<TimedStep> ops = {
          {"copy (baseline)", 2, [&] { copy_gradients(s.params, scratch); }},
          {"sgd momentum", 5, [&] { sgd.step(*be, s.params, 1e-6); }},
          {"sgd nesterov + weight decay", 5, [&] { nesterov.step(*be, s.params, 1e-6); }},
          {"sgd without momentum", 3, [&] { plain.step(*be, s.params, 1e-6); }},
          {"adamw", 7, [&] { adamw.step(*be, s.params, 1e-6); }},
      };
      for (const std::string& t : split(thread_list)) {
        const int threads = std::stoi(t);
        LATHE_CHECK(threads >= 1, "--threads: ", t, " is not a thread count");
        omp_set_num_threads(threads);
        std::vector<std::vector<double>> times(ops.size());
        for (const TimedStep& op : ops)  // warm-up: the optimizers' state allocated, pages touched
          for (int w = 0; w < 3; ++w)
            op.run();
        for (int r = 0; r < rounds; ++r)
          for (size_t k = 0; k < ops.size(); ++k)
            for (int i = 0; i < reps; ++i) {
              const auto t0 = Clock::now();
              ops[k].run();
              times[k].push_back(seconds_since(t0));
            }
        const double copy_rate = 2.0 * 4.0 * static_cast<double>(s.elements) / median(times[0]);
        for (size_t k = 0; k < ops.size(); ++k) {
          const double sec = median(times[k]);
          const double rate = ops[k].streams * 4.0 * static_cast<double>(s.elements) / sec;
          std::cout << "| " << what << " (" << s.elements << ") | " << threads << " | " << ops[k].name << " | "
                    << fmt(1000 * sec, 3) << " | " << fmt(rate / 1e9, 1) << " | " << fmt(rate / copy_rate, 2)
                    << " |\n";
          out["rows"].push_back({{"parameters", what},
                                 {"elements", s.elements},
                                 {"threads", threads},
                                 {"step", ops[k].name},
                                 {"ms", 1000 * sec},
                                 {"gb_per_s", rate / 1e9},
                                 {"of_copy", rate / copy_rate}});
        }
      }
    }
    std::cout << "\n(median of " << rounds << " x " << reps << " timed steps each, wall clock; GB/s = the bytes "
              << "the step must read and write / its time)\n"
              << out.dump() << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optimizer_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
