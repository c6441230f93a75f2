// Gradient all-reduce micro-benchmark: 2 CPU ranks (this process and a forked child) meet in a
// FileStore folder and time GlooCommunicator::all_reduce_gradients (bucket copy-in, Gloo ring
// all-reduce over loopback tcp, divide, copy-out) for one bucket of 1 KB .. 25 MB. Prints per size
// the median time, the algorithm bandwidth (bytes / time) and the ring model's bus bandwidth
// 2(N-1)/N x bytes / time, the figure comparable across world sizes.
//   bench/allreduce [reps_scale=1]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/dist/gloo_communicator.h"

namespace {

const std::vector<size_t> kSizes = {1u << 10, 16u << 10, 256u << 10, 1u << 20, 4u << 20, 25u << 20};

int reps_for(size_t bytes, double scale) {
  return std::clamp(static_cast<int>(scale * (256.0 * (1 << 20)) / bytes), 5, 400);
}

void run_rank(int rank, int world, const std::string& folder, double scale) {
  for (size_t bytes : kSizes) {
    lathe::dist::GlooOptions opts;
    opts.rendezvous = folder;
    opts.run_id = "bench" + std::to_string(bytes);
    opts.bucket_mb = static_cast<double>(bytes) / (1 << 20);
    opts.timeout_s = 60;
    lathe::dist::GlooCommunicator comm(rank, world, opts);
    const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
    lathe::Param p{"w", lathe::Tensor::zeros({n}, lathe::DType::f32), lathe::Tensor::zeros({n}, lathe::DType::f32)};
    p.grad.fill(rank + 1.0);
    std::vector<lathe::NamedParam> named = {{"0.w", &p}};
    for (int i = 0; i < 3; ++i)
      comm.all_reduce_gradients(named);  // warm-up (connections, pages)
    const int reps = reps_for(bytes, scale);
    std::vector<double> times;
    for (int i = 0; i < reps; ++i) {
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      comm.all_reduce_gradients(named);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    if (rank == 0) {
      const double algbw = bytes / t / 1e9;
      const double busbw = 2.0 * (world - 1) / world * bytes / t / 1e9;
      std::printf("%10zu %8d %12.4f %10.3f %10.3f\n", bytes, reps, t * 1e3, algbw, busbw);
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
  std::printf("allreduce: %d CPU ranks, Gloo tcp over loopback, FileStore %s\n", world, folder.c_str());
  std::printf("%10s %8s %12s %10s %10s\n", "bytes", "reps", "median_ms", "algbw_GB/s", "busbw_GB/s");
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
