// bench/int8_first_conv: the cnn's first INT8 convolution (1 -> 32 channels, 3x3, padding 1, ReLU,
// u8 -> u8) and the 2x2 max pooling after it, on a batch of 28x28 images: the oneDNN kernel the cpu
// backend runs unfused + the backend's integer pooling, against Lathe's single-channel VNNI kernel
// with the pooling fused in (backend/cpu/int8_conv_c1.h, Int8Kernel::fuse_maxpool), in alternating
// rounds in one process. Prints one JSON object: medians of the wall time and of the
// thread CPU time per call (the CPU time is the fairer figure on a shared machine: it does not count
// time the thread waited for a core), and oneDNN / Lathe ratios. Random weights and inputs, with
// quantization parameters from their ranges; both kernels' outputs are compared (must be equal).
//   int8_first_conv [--batch 256] [--threads 1] [--rounds 7] [--reps 20]
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/int8_cpu.h"
#include "engine/compress/quant/int8_layer.h"
#include "engine/core/rng.h"
#include "engine/core/timing.h"

using namespace lathe;

namespace {

Tensor random_f32(const Shape& shape, Rng& rng, double lo, double hi) {
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<float>(rng.uniform(lo, hi));
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timing {
  std::vector<double> wall, cpu;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 256;
  int threads = 1, rounds = 7, reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--batch")
      batch = v;
    else if (a == "--threads")
      threads = v;
    else if (a == "--rounds")
      rounds = v;
    else if (a == "--reps")
      reps = v;
    else {
      std::cerr << "int8_first_conv: unknown flag " << a << " (--batch, --threads, --rounds, --reps)\n";
      return 2;
    }
  }
  omp_set_num_threads(threads);
  auto be = make_backend("cpu");
  Rng rng(7);
  const Tensor x = random_f32({batch, 1, 28, 28}, rng, 0.0, 1.0);
  const Tensor w = random_f32({32, 1, 3, 3}, rng, -0.5, 0.5), b = random_f32({32}, rng, -0.1, 0.1);
  Int8LayerConfig cfg;
  cfg.src = make_quant_params(0.0, 1.0, 8, false, false);
  cfg.dst = make_quant_params(0.0, 2.0, 8, false, false);
  cfg.post = PostOp::relu;
  const Int8LayerData layer = make_int8_layer(w, &b, cfg);
  const ConvParams conv{1, 1, 1, 1};
  Tensor q = Tensor::empty({batch, 1, 28, 28}, DType::u8, Device::cpu(), MemoryFormat::channels_last);
  be->quantize(x, cfg.src, q);

  const PoolParams pool{2, 2, 2, 2, 0, 0};
  auto fused = be->make_int8_kernel(layer, &conv);
  const bool can_fuse = fused->fuse_maxpool(pool);
  auto onednn = be->make_int8_kernel(layer, &conv);
  auto conv_then_pool = [&](Int8Kernel& k) {
    const Tensor c = k.forward(q);
    Tensor p = Tensor::empty({batch, 32, 14, 14}, c.dtype(), Device::cpu(), MemoryFormat::channels_last);
    be->int8_maxpool2d(pool, c, p);
    return p;
  };
  const Tensor c = conv_then_pool(*onednn), f = fused->forward(q);
  const auto same = [](const Tensor& u, const Tensor& v) {
    return u.numel() == v.numel() && std::memcmp(u.raw(), v.raw(), static_cast<size_t>(u.numel())) == 0;
  };
  const bool equal = !can_fuse || same(f, c);

  Timing to, tf;
  auto time_one = [&](const std::function<void()>& fn, Timing& t) {
    const auto t0 = Clock::now();
    const double c0 = thread_cpu_seconds();
    for (int r = 0; r < reps; ++r)
      fn();
    t.cpu.push_back((thread_cpu_seconds() - c0) / reps);
    t.wall.push_back(seconds_since(t0) / reps);
  };
  for (int r = 0; r < rounds; ++r) {
    time_one([&] { conv_then_pool(*onednn); }, to);
    if (can_fuse)
      time_one([&] { fused->forward(q); }, tf);
  }
  nlohmann::json out{{"what", "int8 conv2d 1->32 k3 p1 +relu u8->u8, 28x28, then maxpool 2x2 s2: ms per call, "
                             "medians of alternating rounds"},
                     {"batch", batch},
                     {"threads", threads},
                     {"cpu_isa", cpu_int8_isa_name()},
                     {"onednn_impl", onednn->implementation()},
                     {"fused", can_fuse},
                     {"outputs_equal", equal},
                     {"onednn_then_pool_ms", median(to.wall) * 1e3},
                     {"onednn_then_pool_thread_cpu_ms", median(to.cpu) * 1e3}};
  if (can_fuse) {
    out["fused_impl"] = fused->implementation();
    out["fused_ms"] = median(tf.wall) * 1e3;
    out["fused_thread_cpu_ms"] = median(tf.cpu) * 1e3;
    out["fused_speedup_wall"] = median(to.wall) / median(tf.wall);
    out["fused_speedup_thread_cpu"] = median(to.cpu) / median(tf.cpu);
  }
  if (threads > 1)
    out["note"] = "with more than one thread the thread CPU time is the calling thread's only";
  std::cout << out.dump(2) << "\n";
  return equal ? 0 : 1;
}
