// Deterministic random numbers: the same seed gives the same stream on every machine and build.
// (std::uniform_real_distribution and std::normal_distribution are implementation-defined.)
#pragma once

#include <cmath>
#include <cstdint>

namespace lathe {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : m_state(seed ^ 0x9e3779b97f4a7c15ull) { next_u64(); }

  /// splitmix64: tiny, fast, and good enough for initialisation, shuffling and augmentation.
  uint64_t next_u64() {
    uint64_t z = (m_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return n ? next_u64() % n : 0; }
  /// Standard normal (Box-Muller, one value per call).
  double normal() {
    double u1 = uniform();
    if (u1 < 1e-300)
      u1 = 1e-300;
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  /// A derived, independent stream (for per-worker or per-layer generators).
  Rng fork(uint64_t salt) { return Rng(next_u64() ^ (salt * 0xd1b54a32d192ed03ull)); }

  /// The whole state (checkpoints): from_state(state()) continues the stream exactly.
  uint64_t state() const { return m_state; }
  static Rng from_state(uint64_t state) {
    Rng r;
    r.m_state = state;
    return r;
  }

 private:
  uint64_t m_state;
};

}  // namespace lathe
