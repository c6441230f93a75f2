// Young's and Daly's checkpoint intervals, the expected wall time under Poisson interruptions, and
// a Monte-Carlo simulation of the same process.
#include "engine/run/spot_model.h"

#include <cmath>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/rng.h"

namespace lathe {

namespace {

bool no_interruptions(const SpotProcess& p) { return !(p.mtbi_s > 0) || std::isinf(p.mtbi_s); }

void check(const SpotProcess& p) {
  LATHE_CHECK(p.work_s >= 0 && p.interval_s > 0 && p.checkpoint_s >= 0 && p.restart_s >= 0 && p.mtbi_s >= 0,
              "spot model: work ", p.work_s, ", interval ", p.interval_s, ", checkpoint ", p.checkpoint_s, ", restart ",
              p.restart_s, ", mtbi ", p.mtbi_s, " (all >= 0, interval > 0)");
}

/// Expected time to get `length` seconds without an interruption, restarting (R, itself
/// interruptible) after each one: M e^{R/M} (e^{length/M} - 1).
double expected_segment(double length, double restart_s, double mtbi_s) {
  return mtbi_s * std::exp(restart_s / mtbi_s) * std::expm1(length / mtbi_s);
}

double exponential(Rng& rng, double mean) { return -mean * std::log1p(-rng.uniform()); }

}  // namespace

double young_interval(double checkpoint_s, double mtbi_s) {
  LATHE_CHECK(checkpoint_s >= 0 && mtbi_s > 0, "young_interval: C ", checkpoint_s, ", M ", mtbi_s);
  return std::sqrt(2 * checkpoint_s * mtbi_s);
}

double daly_interval(double checkpoint_s, double mtbi_s) {
  LATHE_CHECK(checkpoint_s >= 0 && mtbi_s > 0, "daly_interval: C ", checkpoint_s, ", M ", mtbi_s);
  if (checkpoint_s >= 2 * mtbi_s)
    return mtbi_s;
  const double x = checkpoint_s / (2 * mtbi_s);
  return std::sqrt(2 * checkpoint_s * mtbi_s) * (1 + std::sqrt(x) / 3 + x / 9) - checkpoint_s;
}

double daly_expected_time(const SpotProcess& p) {
  check(p);
  const double segments = p.work_s / p.interval_s;
  if (no_interruptions(p))
    return p.work_s + p.checkpoint_s * segments;
  return expected_segment(p.interval_s + p.checkpoint_s, p.restart_s, p.mtbi_s) * segments;
}

double expected_time(const SpotProcess& p) {
  check(p);
  const double full = std::floor(p.work_s / p.interval_s);
  double last = p.work_s - full * p.interval_s;
  double whole = full;
  if (last <= 1e-9 * p.interval_s && full > 0) {  // the work ends on a segment boundary
    whole -= 1;
    last = p.interval_s;
  }
  if (no_interruptions(p))
    return p.work_s + p.checkpoint_s * whole;
  return whole * expected_segment(p.interval_s + p.checkpoint_s, p.restart_s, p.mtbi_s) +
         expected_segment(last, p.restart_s, p.mtbi_s);
}

SimulatedRun simulate_spot_run(const SpotProcess& p, uint64_t seed) {
  check(p);
  Rng rng(seed);
  SimulatedRun run;
  const bool never = no_interruptions(p);
  double next = never ? std::numeric_limits<double>::infinity() : exponential(rng, p.mtbi_s);  // time to the next one
  double done = 0;
  while (done < p.work_s) {
    const double work = std::min(p.interval_s, p.work_s - done);
    const bool last = done + work >= p.work_s;
    const double need = work + (last ? 0 : p.checkpoint_s);
    if (next >= need) {  // the segment and its checkpoint complete
      run.wall_s += need;
      next -= need;
      done += work;
      if (!last)
        run.checkpoint_total_s += p.checkpoint_s;
      continue;
    }
    // Interrupted: the time until then is lost, then a restart that can itself be interrupted.
    run.wall_s += next;
    run.redone_s += std::min(next, work);
    ++run.interruptions;
    while (true) {
      next = exponential(rng, p.mtbi_s);
      if (next >= p.restart_s) {
        run.wall_s += p.restart_s;
        run.restart_wait_s += p.restart_s;
        next -= p.restart_s;
        break;
      }
      run.wall_s += next;
      run.restart_wait_s += next;
      ++run.interruptions;
    }
  }
  return run;
}

double monte_carlo_expected_time(const SpotProcess& p, int runs, uint64_t seed) {
  LATHE_CHECK(runs > 0, "monte_carlo_expected_time: runs ", runs);
  double total = 0;
  for (int i = 0; i < runs; ++i)
    total += simulate_spot_run(p, seed + static_cast<uint64_t>(i)).wall_s;
  return total / runs;
}

std::vector<double> expected_time_curve(SpotProcess p, const std::vector<double>& intervals) {
  std::vector<double> out;
  out.reserve(intervals.size());
  for (const double tau : intervals) {
    p.interval_s = tau;
    out.push_back(expected_time(p));
  }
  return out;
}

}  // namespace lathe
