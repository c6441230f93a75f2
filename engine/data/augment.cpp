// Shift / flip / noise on one float image; the rule that maps `strength` onto them is in augment.h.
#include "engine/data/augment.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace lathe {

void validate_augment(const AugmentOptions& o) {
  if (o.shift_px < 0)
    throw ConfigError("augment.shift_px must be >= 0 (pixels), got " + std::to_string(o.shift_px));
  if (!std::isfinite(o.noise_std) || o.noise_std < 0)
    throw ConfigError("augment.noise_std must be a finite value >= 0, got " + std::to_string(o.noise_std));
  if (!std::isfinite(o.strength) || o.strength < 0)
    throw ConfigError("augment.strength must be a finite value >= 0 (0 disables augmentation), got " +
                      std::to_string(o.strength));
}

int effective_shift(const AugmentOptions& o) {
  if (o.shift_px <= 0 || o.strength <= 0)
    return 0;
  return static_cast<int>(std::lround(o.shift_px * o.strength));
}

double flip_probability(const AugmentOptions& o) {
  return o.hflip && o.strength > 0 ? 0.5 * std::min(o.strength, 1.0) : 0.0;
}

double effective_noise_std(const AugmentOptions& o) {
  return o.noise_std > 0 && o.strength > 0 ? o.noise_std * o.strength : 0.0;
}

bool augment_enabled(const AugmentOptions& o) {
  return effective_shift(o) > 0 || flip_probability(o) > 0 || effective_noise_std(o) > 0;
}

AugmentPlan draw_augment(const AugmentOptions& o, Rng& rng) {
  AugmentPlan plan;
  const int s = effective_shift(o);
  if (s > 0) {
    const uint64_t span = 2 * static_cast<uint64_t>(s) + 1;
    plan.dx = static_cast<int>(rng.below(span)) - s;
    plan.dy = static_cast<int>(rng.below(span)) - s;
  }
  const double p = flip_probability(o);
  if (p > 0)
    plan.flip = rng.uniform() < p;
  plan.noise_std = effective_noise_std(o);
  return plan;
}

void apply_augment(const AugmentPlan& plan, const float* src, float* dst, int64_t rows, int64_t cols,
                   const PixelSpace& space, Rng& noise_rng) {
  const int64_t n = rows * cols;
  const bool moves = plan.dx != 0 || plan.dy != 0 || plan.flip;
  std::vector<float> copy;
  if (moves && src == dst) {  // the geometric part reads pixels it has already overwritten
    copy.assign(src, src + n);
    src = copy.data();
  }
  if (moves) {
    const float pad = space.black();
    // Destination columns whose source column c - dx lies inside the image.
    const int64_t c0 = std::clamp<int64_t>(plan.dx, 0, cols);
    const int64_t c1 = std::clamp<int64_t>(cols + plan.dx, 0, cols);
    for (int64_t r = 0; r < rows; ++r) {
      float* out = dst + r * cols;
      const int64_t sr = r - plan.dy;
      if (sr < 0 || sr >= rows) {
        std::fill_n(out, cols, pad);
        continue;
      }
      const float* in = src + sr * cols;
      std::fill(out, out + c0, pad);
      if (plan.flip) {
        for (int64_t c = c0; c < c1; ++c)
          out[c] = in[cols - 1 - (c - plan.dx)];
      } else if (c1 > c0) {
        std::copy(in + (c0 - plan.dx), in + (c1 - plan.dx), out + c0);
      }
      std::fill(out + std::max(c0, c1), out + cols, pad);
    }
  } else if (src != dst) {
    std::copy(src, src + n, dst);
  }
  if (plan.noise_std > 0) {
    // Box-Muller keeping both values of each pair: half the log/sqrt calls of Rng::normal(), which
    // matters because noise is the costliest part of a batch.
    const float scale = static_cast<float>(plan.noise_std / space.std);  // intensity units -> normalised units
    for (int64_t i = 0; i < n; i += 2) {
      // u1 in (0, 1] with 24 bits, so the float log is finite; float math is plenty for noise.
      const float u1 = static_cast<float>((noise_rng.next_u64() >> 40) + 1) * 0x1.0p-24f;
      const float angle = 6.2831853f * static_cast<float>(noise_rng.next_u64() >> 40) * 0x1.0p-24f;
      const float radius = scale * std::sqrt(-2.0f * std::log(u1));
      dst[i] += radius * std::cos(angle);
      if (i + 1 < n)
        dst[i + 1] += radius * std::sin(angle);
    }
  }
}

void augment_image(const float* src, float* dst, int64_t rows, int64_t cols, const AugmentOptions& options, Rng& rng,
                   const PixelSpace& space) {
  const AugmentPlan plan = draw_augment(options, rng);
  apply_augment(plan, src, dst, rows, cols, space, rng);
}

void augment_channels(const float* src, float* dst, int64_t channels, int64_t rows, int64_t cols,
                      const AugmentOptions& options, Rng& rng, const std::vector<PixelSpace>& spaces) {
  LATHE_CHECK(static_cast<int64_t>(spaces.size()) == channels, "augment_channels: ", spaces.size(),
              " pixel spaces for ", channels, " channels");
  const AugmentPlan plan = draw_augment(options, rng);
  const int64_t plane = rows * cols;
  for (int64_t c = 0; c < channels; ++c)
    apply_augment(plan, src + c * plane, dst + c * plane, rows, cols, spaces[static_cast<size_t>(c)], rng);
}

}  // namespace lathe
