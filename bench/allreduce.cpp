// Gradient all-reduce micro-benchmark: 2 CPU ranks (this process and a forked child) meet in a
// FileStore folder and time GlooCommunicator::all_reduce_gradients for one bucket of 1 KB .. 25 MB:
// f32 through shared memory (ranks on one machine, the default: gradients copied into the segment
// in chunks, each rank sums and divides its share, copied back) and, row tcp, the same over Gloo's
// ring all-reduce on loopback tcp (bucket copy-in, all-reduce, divide, copy-out). Prints per size
// the median time, the algorithm bandwidth (bytes / time) and the ring model's bus bandwidth
// 2(N-1)/N x bytes / time, the figure comparable across world sizes (bytes: the f32 payload in
// every row). Per size also (ratio = time / f32 shared-memory time):
//   tcp         f32 over loopback tcp
//   fp16, bf16  the same buckets in 16 bits through shared memory (rounded into the slots, summed in
//               f32, the mean rounded once)
//   fp16-tcp, bf16-tcp  the same 16-bit buckets over Gloo's loopback tcp (f32 sums on each hop)
//   arena       f32 through shared memory as the training loop sends it: planned by grad_ready_hook,
//               so the gradient lives in the shared gradient arena and is averaged in place (no
//               copies into the slots and back; shm_grad_arena.h)
//   overlap     the payload as 8 parameters (8 buckets) whose gradients a simulated backward pass
//               (8 sleeps adding up to the f32 time) hands over one by one; the time is that of the
//               whole step (backward + all_reduce_gradients), the ratio against backward + blocking
//               f32 all-reduce (0.5 = the communication fully hidden).
// First two rows: the per-step vote of the training loop (all_reduce_sum of 3 doubles) through shared
// memory and over tcp (ratio = tcp / shared memory).
//   bench/allreduce [reps_scale=1]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/dist/gloo_communicator.h"

namespace {

const std::vector<size_t> kSizes = {1u << 10, 16u << 10, 256u << 10, 1u << 20, 4u << 20, 25u << 20};

int reps_for(size_t bytes, double scale) {
  return std::clamp(static_cast<int>(scale * (256.0 * (1 << 20)) / bytes), 5, 400);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median seconds of one all_reduce_gradients over `named` (after a barrier), or with `backward_s`,
// of the whole simulated step: backward (one sleep per parameter, hook after each), then the call.
double time_mode(lathe::dist::GlooCommunicator& comm, std::vector<lathe::NamedParam>& named, int reps, bool overlap,
                 double backward_s) {
  for (int i = 0; i < 3; ++i)
    comm.all_reduce_gradients(named);  // warm-up (connections, pages)
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (backward_s > 0) {
      std::function<void(const lathe::Param*)> hook;
      if (overlap)
        hook = comm.grad_ready_hook(named);
      const auto slice = std::chrono::duration<double>(backward_s / static_cast<double>(named.size()));
      for (size_t k = named.size(); k-- > 0;) {
        std::this_thread::sleep_for(slice);
        if (hook)
          hook(named[k].param);
      }
    }
    comm.all_reduce_gradients(named);
    times.push_back(seconds_since(t0));
  }
  return median(times);
}

// Median seconds of one all_reduce_sum of 3 doubles (the training loop's per-step stop vote).
double time_vote(lathe::dist::GlooCommunicator& comm, int reps) {
  std::vector<double> times;
  for (int i = 0; i < reps + 3; ++i) {
    double v[3] = {1, 0, static_cast<double>(i)};
    const auto t0 = std::chrono::steady_clock::now();
    comm.all_reduce_sum(v, 3);
    if (i >= 3)
      times.push_back(seconds_since(t0));
  }
  return median(times);
}

void run_rank(int rank, int world, const std::string& folder, double scale) {
  using Compression = lathe::dist::GlooOptions::Compression;
  {
    // The per-step vote (3 doubles): through shared memory, and over tcp.
    const int reps = std::clamp(static_cast<int>(400 * scale), 5, 4000);
    std::vector<double> t;
    for (bool shm : {true, false}) {
      lathe::dist::GlooOptions opts;
      opts.rendezvous = folder;
      opts.run_id = shm ? "vote-shm" : "vote-tcp";
      opts.timeout_s = 60;
      opts.shared_memory = shm;
      lathe::dist::GlooCommunicator comm(rank, world, opts);
      t.push_back(time_vote(comm, reps));
    }
    if (rank == 0) {
      std::printf("%10d %-8s %6d %12.4f %10s %10s %7.3f\n", 24, "vote", reps, t[0] * 1e3, "-", "-", 1.0);
      std::printf("%10d %-8s %6d %12.4f %10s %10s %7.3f\n", 24, "vote-tcp", reps, t[1] * 1e3, "-", "-", t[1] / t[0]);
      std::fflush(stdout);
    }
  }
  for (size_t bytes : kSizes) {
    const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
    const int reps = reps_for(bytes, scale);
    auto make = [&](const std::string& tag, double bucket_bytes, Compression c, bool shm = true) {
      lathe::dist::GlooOptions opts;
      opts.rendezvous = folder;
      opts.run_id = "bench" + tag + std::to_string(bytes);
      opts.bucket_mb = bucket_bytes / (1 << 20);
      opts.timeout_s = 60;
      opts.compression = c;
      opts.shared_memory = shm;
      return std::make_unique<lathe::dist::GlooCommunicator>(rank, world, opts);
    };
    lathe::Param p{"w", lathe::Tensor::zeros({n}, lathe::DType::f32), lathe::Tensor::zeros({n}, lathe::DType::f32)};
    p.grad.fill(rank + 1.0);
    std::vector<lathe::NamedParam> one = {{"0.w", &p}};
    // The same payload as 8 parameters, for the overlap rows.
    std::vector<lathe::Param> parts;
    parts.reserve(8);
    for (int k = 0; k < 8; ++k) {
      parts.push_back(
          {"w", lathe::Tensor::zeros({n / 8}, lathe::DType::f32), lathe::Tensor::zeros({n / 8}, lathe::DType::f32)});
      parts.back().grad.fill(rank + 1.0);
    }
    std::vector<lathe::NamedParam> eight;
    for (int k = 0; k < 8; ++k)
      eight.push_back({std::to_string(k) + ".w", &parts[static_cast<size_t>(k)]});

    auto f32 = make("f32", static_cast<double>(bytes), Compression::none);
    const double t32 = time_mode(*f32, one, reps, false, 0);
    auto tcp = make("tcp", static_cast<double>(bytes), Compression::none, false);
    const double ttcp = time_mode(*tcp, one, reps, false, 0);
    auto f16 = make("fp16", static_cast<double>(bytes), Compression::fp16);
    const double t16 = time_mode(*f16, one, reps, false, 0);
    auto b16 = make("bf16", static_cast<double>(bytes), Compression::bf16);
    const double tb16 = time_mode(*b16, one, reps, false, 0);
    auto f16t = make("fp16tcp", static_cast<double>(bytes), Compression::fp16, false);
    const double t16t = time_mode(*f16t, one, reps, false, 0);
    auto b16t = make("bf16tcp", static_cast<double>(bytes), Compression::bf16, false);
    const double tb16t = time_mode(*b16t, one, reps, false, 0);
    // Both step timings in one pair of communicators per mode, backward = the f32 time (rank 0's,
    // agreed on through an all-reduce so every rank sleeps the same).
    double backward_s = t32;
    f32->all_reduce_sum(&backward_s, 1);
    backward_s /= world;
    auto blk = make("blk", static_cast<double>(bytes) / 8, Compression::none);
    const int step_reps = std::max(5, reps / 4);
    const double t_block = time_mode(*blk, eight, step_reps, false, backward_s);
    auto ovl = make("ovl", static_cast<double>(bytes) / 8, Compression::none);
    const double t_over = time_mode(*ovl, eight, step_reps, true, backward_s);
    // The arena: one plan (collective), then every call finds the gradient at its place.
    lathe::Param q{"w", lathe::Tensor::zeros({n}, lathe::DType::f32), lathe::Tensor::zeros({n}, lathe::DType::f32)};
    q.grad.fill(rank + 1.0);
    std::vector<lathe::NamedParam> planned = {{"0.w", &q}};
    auto arena = make("arena", static_cast<double>(bytes), Compression::none);
    arena->grad_ready_hook(planned);
    const double tarena = time_mode(*arena, planned, reps, false, 0);
    if (rank == 0) {
      auto row = [&](const char* mode, int r, double t, double ratio) {
        const double algbw = bytes / t / 1e9;
        const double busbw = 2.0 * (world - 1) / world * bytes / t / 1e9;
        std::printf("%10zu %-8s %6d %12.4f %10.3f %10.3f %7.3f\n", bytes, mode, r, t * 1e3, algbw, busbw, ratio);
      };
      row("f32", reps, t32, 1.0);
      row("arena", reps, tarena, tarena / t32);
      row("tcp", reps, ttcp, ttcp / t32);
      row("fp16", reps, t16, t16 / t32);
      row("bf16", reps, tb16, tb16 / t32);
      row("fp16-tcp", reps, t16t, t16t / t32);
      row("bf16-tcp", reps, tb16t, tb16t / t32);
      row("blk+bw", step_reps, t_block, 1.0);
      row("ovl+bw", step_reps, t_over, t_over / t_block);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int world = 2;
  char templ[] = "/tmp/lathe-allreduce-XXXXXX";
  if (!mkdtemp(templ))
    return 1;
  const std::string folder = templ;
  std::printf(
      "allreduce: %d CPU ranks on this machine (f32, fp16, bf16: shared memory; *tcp: Gloo over loopback), "
      "FileStore %s\n",
      world, folder.c_str());
  std::printf("%10s %-8s %6s %12s %10s %10s %7s\n", "bytes", "mode", "reps", "median_ms", "algbw_GB/s", "busbw_GB/s",
              "ratio");
  const pid_t child = fork();
  if (child == 0) {
    try {
      run_rank(1, world, folder, scale);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank 1: %s\n", e.what());
      _exit(1);
    }
    _exit(0);
  }
  int code = 0;
  try {
    run_rank(0, world, folder, scale);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank 0: %s\n", e.what());
    code = 1;
    kill(child, SIGKILL);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::filesystem::remove_all(folder);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    code = 1;
  return code;
}
