// /proc- and getrusage-based CPU telemetry and the SGEMM peak measurement.
#include "engine/core/timing.h"
#include "engine/run/telemetry.h"

#include <omp.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/backend/cpu/reference_backend.h"
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

PeakFlops cpu_peak_flops(int threads) {
  PeakFlops now = measure_cpu_peak_flops(threads);
  const std::string path = peak_cache_path();
  if (path.empty())
    return now;
  const std::string key = cpu_model_name() + " x" + std::to_string(threads);
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
  const double best = cache.contains(key) && cache[key].is_number() ? cache[key].get<double>() : 0.0;
  if (best > now.flops_per_s) {
    PeakFlops p;
    p.flops_per_s = best;
    p.how = now.how + "; using the best recorded on this machine (" + std::to_string(static_cast<int64_t>(best / 1e9)) +
            " GFLOP/s > " + std::to_string(static_cast<int64_t>(now.flops_per_s / 1e9)) + " now)";
    return p;
  }
  try {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    cache[key] = now.flops_per_s;
    write_file_atomic(path, cache.dump(2) + "\n");
  } catch (const std::exception&) {
    // No writable cache: this run's measurement stands alone.
  }
  return now;
}

}  // namespace lathe
