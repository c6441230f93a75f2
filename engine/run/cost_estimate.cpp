// Expected wall time and dollars on-demand and on spot from measured inputs.
#include "engine/core/timing.h"
#include "engine/run/cost_estimate.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/core/file_write.h"

namespace lathe {

namespace {

double usd(const CostInputs& in, bool spot, double wall_s) { return cost_usd(*in.instance, spot, in.devices, wall_s); }

}  // namespace

CostEstimate estimate_cost(const CostInputs& in, int monte_carlo_runs, uint64_t seed) {
  LATHE_CHECK(in.instance, "estimate_cost: no instance");
  LATHE_CHECK(in.work_s >= 0 && in.checkpoint_s >= 0 && in.restart_s >= 0 && in.interruptions_per_hour >= 0,
              "estimate_cost: negative input (work ", in.work_s, " s, checkpoint ", in.checkpoint_s, " s, restart ",
              in.restart_s, " s, ", in.interruptions_per_hour, " interruptions/h)");
  CostEstimate e;
  e.on_demand_wall_s = in.work_s;
  e.on_demand_usd = usd(in, false, in.work_s);
  e.spot_usd_no_interruptions = usd(in, true, in.work_s);
  if (in.interruptions_per_hour <= 0 || in.work_s <= 0) {
    e.spot_wall_s = e.spot_wall_daly_closed_s = e.spot_wall_monte_carlo_s = in.work_s;
    e.spot_usd = e.spot_usd_no_interruptions;
    return e;
  }
  const double mtbi = 3600.0 / in.interruptions_per_hour;
  // A checkpoint that costs nothing (C = 0) would make Young's interval 0: keep one step's worth.
  const double c = std::max(in.checkpoint_s, 1e-3);
  e.young_interval_s = young_interval(c, mtbi);
  e.daly_interval_s = daly_interval(c, mtbi);
  SpotProcess p{.work_s = in.work_s,
                .interval_s = std::min(e.young_interval_s, in.work_s),
                .checkpoint_s = in.checkpoint_s,
                .restart_s = in.restart_s,
                .mtbi_s = mtbi};
  e.spot_wall_s = expected_time(p);
  e.spot_usd = usd(in, true, e.spot_wall_s);
  e.spot_wall_daly_closed_s = daly_expected_time(p);
  e.monte_carlo_runs = monte_carlo_runs;
  e.spot_wall_monte_carlo_s = monte_carlo_runs > 0 ? monte_carlo_expected_time(p, monte_carlo_runs, seed) : 0;
  for (int k = -8; k <= 8; ++k) {
    const double tau = std::min(e.young_interval_s * std::pow(2.0, k / 2.0), in.work_s);
    p.interval_s = tau;
    const double wall = expected_time(p);
    if (e.curve.empty() || e.curve.back().interval_s < tau)
      e.curve.push_back({tau, wall, usd(in, true, wall)});
  }
  return e;
}

double measure_checkpoint_write(const std::string& folder, int64_t bytes, int repeats) {
  LATHE_CHECK(bytes >= 0 && repeats > 0, "measure_checkpoint_write: bytes ", bytes, ", repeats ", repeats);
  namespace fs = std::filesystem;
  const std::string tmp = (fs::path(folder) / (".lathe-ckpt-probe.tmp" + std::to_string(getpid()))).string();
  const std::string dst = (fs::path(folder) / (".lathe-ckpt-probe" + std::to_string(getpid()))).string();
  const std::string chunk(static_cast<size_t>(std::min<int64_t>(bytes, 8 << 20)), '\x5a');
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      FileWriter out(tmp);
      for (int64_t left = bytes; left > 0; left -= static_cast<int64_t>(chunk.size()))
        out.write(std::string_view(chunk).substr(0, static_cast<size_t>(std::min<int64_t>(left, chunk.size()))));
      out.close(/*fsync=*/true);
    } catch (const Error& e) {
      ::unlink(tmp.c_str());
      throw DataError(std::string("measuring a checkpoint write: ") + e.what());
    }
    if (::rename(tmp.c_str(), dst.c_str()) != 0) {
      ::unlink(tmp.c_str());
      throw DataError("measuring a checkpoint write: " + write_error_message(tmp, errno, "renaming"));
    }
    const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
    times.push_back(seconds_since(t0));
    ::unlink(dst.c_str());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace lathe
