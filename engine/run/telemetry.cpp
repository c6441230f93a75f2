// /proc- and getrusage-based CPU telemetry and the SGEMM peak measurement.
#include "engine/core/timing.h"
#include "engine/run/telemetry.h"

#include <omp.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/core/error.h"
#include "engine/run/run_dir.h"

namespace lathe {

namespace {
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return 1;
}

CpuUtilMeter::CpuUtilMeter()
    : m_last_cpu_s(process_cpu_seconds()), m_last_wall_s(wall_seconds()), m_cores(usable_cores()) {}

double CpuUtilMeter::sample() {
  const double cpu = process_cpu_seconds(), wall = wall_seconds();
  const double dt = wall - m_last_wall_s;
  const double util = dt > 0 ? (cpu - m_last_cpu_s) / dt / m_cores : 0;
  m_last_cpu_s = cpu;
  m_last_wall_s = wall;
  return std::clamp(util, 0.0, 1.0);
}

double machine_busy_cpu_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu")
    return NAN;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return (user + nice + system + irq + softirq + steal) / (tick > 0 ? tick : 100.0);
}

LoadMeter::LoadMeter()
    : m_busy_s(machine_busy_cpu_seconds()), m_own_s(process_cpu_seconds()), m_wall_s(wall_seconds()) {}

double LoadMeter::others_share() const {
  const double busy = machine_busy_cpu_seconds(), own = process_cpu_seconds(), wall = wall_seconds() - m_wall_s;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (std::isnan(busy) || std::isnan(m_busy_s) || wall <= 0 || cores <= 0)
    return NAN;
  const double others = (busy - m_busy_s) - (own - m_own_s);  // /proc/stat ticks are coarse: clamp
  return std::clamp(others / (wall * static_cast<double>(cores)), 0.0, 1.0);
}

int64_t process_peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

PeakFlops measure_cpu_peak_flops(int threads) {
  const int n = 1536;
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size(), 0.f);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    dnnl_sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    const double s = seconds_since(t0);
    if (rep > 0)
      best = std::min(best, s);  // the first call JIT-compiles
  }
  omp_set_num_threads(saved);
  PeakFlops p;
  p.flops_per_s = 2.0 * n * n * n / best;
  p.how = "measured: oneDNN SGEMM " + std::to_string(n) + "^3 f32 on " + std::to_string(threads) + " thread(s)";
  return p;
}

PeakFlops measure_cpu_peak_ops(int threads, DType dtype) {
  if (dtype == DType::f32)
    return measure_cpu_peak_flops(threads);
  LATHE_CHECK(dtype == DType::bf16 || dtype == DType::s8, "measure_cpu_peak_ops: dtype ", dtype_name(dtype),
              " (allowed: f32, bf16, s8)");
  using dnnl::memory;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const bool bf16 = dtype == DType::bf16;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::string impl;
  // Best time of `reps` n^3 products (the first call JIT-compiles and is not counted).
  auto best_of = [&](int64_t n, int reps) {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const memory::desc a_md({n, n}, bf16 ? dt::bf16 : dt::u8, tag::ab);
    const memory::desc b_md({n, n}, bf16 ? dt::bf16 : dt::s8, tag::any);
    const memory::desc c_md({n, n}, bf16 ? dt::f32 : dt::s32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
    impl = pd.impl_info_str();
    memory a(a_md, eng), b(pd.weights_desc(), eng), c(c_md, eng);
    std::memset(a.get_data_handle(), 0x3c, a_md.get_size());  // small values in either encoding
    std::memset(b.get_data_handle(), 0x01, pd.weights_desc().get_size());
    dnnl::matmul mm(pd);
    double best = 1e30;
    for (int rep = 0; rep < reps; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      mm.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
      strm.wait();
      const double sec = seconds_since(t0);
      if (rep > 0)
        best = std::min(best, sec);
    }
    return best;
  };
  int64_t n = 512;
  double best = 0;
  try {
    // A probe first: a CPU without native kernels for the type runs oneDNN's slow reference code,
    // where a 2048^3 product would take seconds; there the probe's figure is the peak.
    best = best_of(n, 3);
    if (best < 0.02) {
      n = 2048;
      best = best_of(n, 5);
    }
  } catch (const dnnl::error& e) {
    omp_set_num_threads(saved);
    LATHE_FAIL("measure_cpu_peak_ops: oneDNN ", dtype_name(dtype), " matmul unavailable: ", e.what());
  }
  omp_set_num_threads(saved);
  PeakFlops p;
  p.flops_per_s = 2.0 * static_cast<double>(n) * n * n / best;
  p.how = "measured: oneDNN " + std::string(bf16 ? "bf16" : "u8 x s8") + " matmul " + std::to_string(n) + "^3 (" +
          impl + ") on " + std::to_string(threads) + " thread(s)";
  return p;
}

namespace {
std::string peak_cache_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (xdg && *xdg)
    return std::string(xdg) + "/lathe/peak_flops.json";
  if (home && *home)
    return std::string(home) + "/.cache/lathe/peak_flops.json";
  return "";
}
}  // namespace

namespace {
std::string peak_key(int threads, DType dtype) {
  std::string key = cpu_model_name() + " x" + std::to_string(threads);
  if (dtype != DType::f32)
    key += dtype == DType::s8 ? " int8" : " " + std::string(dtype_name(dtype));
  return key;
}

nlohmann::json read_peak_cache(const std::string& path) {
  nlohmann::json cache = nlohmann::json::object();
  try {
    std::ifstream in(path);
    if (in)
      cache = nlohmann::json::parse(in);
    if (!cache.is_object())
      cache = nlohmann::json::object();
  } catch (const std::exception&) {
    cache = nlohmann::json::object();  // a damaged cache is rebuilt
  }
  return cache;
}

double recorded_peak(const std::string& path, const std::string& key) {
  if (path.empty())
    return 0.0;
  const nlohmann::json cache = read_peak_cache(path);
  return cache.contains(key) && cache[key].is_number() ? cache[key].get<double>() : 0.0;
}

void record_peak(const std::string& path, const std::string& key, double flops_per_s) {
  if (path.empty())
    return;
  try {
    nlohmann::json cache = read_peak_cache(path);
    if (cache.contains(key) && cache[key].is_number() && cache[key].get<double>() >= flops_per_s)
      return;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    cache[key] = flops_per_s;
    write_file_atomic(path, cache.dump(2) + "\n");
  } catch (const std::exception&) {
    // No writable cache: this run's measurement stands alone.
  }
}
}  // namespace

PeakFlops cpu_peak_flops(int threads, DType dtype) {
  PeakFlops now = measure_cpu_peak_ops(threads, dtype);
  const std::string path = peak_cache_path();
  const std::string key = peak_key(threads, dtype);
  const double best = recorded_peak(path, key);
  if (best > now.flops_per_s) {
    PeakFlops p;
    p.flops_per_s = best;
    p.how = now.how + "; using the best recorded on this machine (" + std::to_string(static_cast<int64_t>(best / 1e9)) +
            " GFLOP/s > " + std::to_string(static_cast<int64_t>(now.flops_per_s / 1e9)) + " now)";
    return p;
  }
  record_peak(path, key, now.flops_per_s);
  return now;
}

PeakFlops raise_peak_to_achieved(const PeakFlops& peak, double achieved, int threads, DType dtype) {
  if (!(achieved > peak.flops_per_s))
    return peak;
  record_peak(peak_cache_path(), peak_key(threads, dtype), achieved);
  PeakFlops p;
  p.flops_per_s = achieved;
  p.how = peak.how + "; raised to the " + std::to_string(static_cast<int64_t>(achieved / 1e9)) +
          " GFLOP/s a run achieved (the peak cannot be lower)";
  return p;
}

double mfu_fraction(double achieved, double peak) {
  if (!(peak > 0) || !(achieved > 0))
    return 0.0;
  return std::min(1.0, achieved / peak);
}

}  // namespace lathe
