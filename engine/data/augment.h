// Training-time image augmentation: random shift, horizontal flip and Gaussian pixel noise, scaled
// together by one `strength` knob. Deterministic: every random choice comes from the Rng passed in,
// so the loader can give each sample its own stream and stay independent of thread timing.
//
// The strength rule (strength >= 0; 0 disables everything):
//   max shift  S = round(shift_px * strength)   (half away from zero); dx and dy are each drawn
//                                                uniformly from the integers in [-S, S]
//   flip       with probability 0.5 * min(strength, 1) when hflip is set
//   noise      sigma = noise_std * strength, in units of pixel intensity in [0, 1] (so 0.1 is 10% of
//              black-to-white whatever the normalisation); added per pixel, not clamped
// Shifted-in pixels are filled with black: intensity 0, which is (0 - mean) / std in the
// normalised space the images are in (PixelSpace::black()), not 0.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/rng.h"

namespace lathe {

struct AugmentOptions {
  int shift_px = 0;       // largest shift in pixels, each axis
  bool hflip = false;     // mirror left-right with probability 0.5 (at strength >= 1)
  double noise_std = 0;   // Gaussian noise, in [0, 1]-intensity units
  double strength = 1.0;  // scales all three; 0 = no augmentation
};

/// How pixel intensities p in [0, 1] are encoded in the float image: value = (p - mean) / std.
struct PixelSpace {
  float mean = 0.0f;
  float std = 1.0f;
  /// The value of a black pixel (intensity 0): what shifted-in pixels are filled with.
  float black() const { return -mean / std; }
};

/// The random choices for one image, drawn by draw_augment (or set by hand in tests).
struct AugmentPlan {
  int dx = 0;              // content moves right by dx (left when negative)
  int dy = 0;              // content moves down by dy (up when negative)
  bool flip = false;       // mirror left-right, applied before the shift
  double noise_std = 0.0;  // in [0, 1]-intensity units
  bool identity() const { return dx == 0 && dy == 0 && !flip && noise_std == 0.0; }
};

/// Throws lathe::ConfigError naming the field (augment.shift_px, ...) when a value is negative or not finite.
void validate_augment(const AugmentOptions& options);

/// The strength rule above, one quantity at a time.
int effective_shift(const AugmentOptions& options);
double flip_probability(const AugmentOptions& options);
double effective_noise_std(const AugmentOptions& options);
/// False when the options can only give the identity (then no randomness is drawn at all).
bool augment_enabled(const AugmentOptions& options);

/// Draws dx, dy (only when the max shift > 0) and flip (only when its probability > 0) from `rng`.
AugmentPlan draw_augment(const AugmentOptions& options, Rng& rng);

/// dst = plan applied to src (rows x cols, row-major floats in `space`); noise comes from `noise_rng`
/// (Box-Muller in float from two 24-bit uniforms per pair of pixels, row-major; tails end at 5.8 sigma).
/// src == dst is allowed.
void apply_augment(const AugmentPlan& plan, const float* src, float* dst, int64_t rows, int64_t cols,
                   const PixelSpace& space, Rng& noise_rng);

/// draw_augment then apply_augment with the same rng. src == dst is allowed.
void augment_image(const float* src, float* dst, int64_t rows, int64_t cols, const AugmentOptions& options, Rng& rng,
                   const PixelSpace& space = {});

/// A C x rows x cols image: one plan drawn from `rng` (the same shift and flip for every channel),
/// applied channel by channel in `spaces[c]` (black = that channel's black), the noise drawn from
/// `rng` after the plan, channel after channel. For one channel this is augment_image exactly.
void augment_channels(const float* src, float* dst, int64_t channels, int64_t rows, int64_t cols,
                      const AugmentOptions& options, Rng& rng, const std::vector<PixelSpace>& spaces);

}  // namespace lathe
