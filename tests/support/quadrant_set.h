// A synthetic dataset the stage tests train on in a few steps: 8x8 images whose class (0-3) is the
// quadrant that is bright.
#pragma once

#include "engine/core/rng.h"
#include "engine/data/dataset.h"

namespace lathe::test {

inline Dataset quadrant_set(int64_t count, uint64_t seed) {
  Dataset d;
  d.rows = d.cols = 8;
  d.count = count;
  d.num_classes = 4;
  d.images.resize(count * 64);
  d.labels.resize(count);
  Rng rng(seed);
  for (int64_t i = 0; i < count; ++i) {
    const int c = static_cast<int>(rng.uniform() * 4) % 4;
    d.labels[i] = c;
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x) {
        const bool bright = (y / 4) * 2 + (x / 4) == c;
        d.images[i * 64 + y * 8 + x] = static_cast<uint8_t>(bright ? 200 + rng.uniform() * 55 : rng.uniform() * 60);
      }
  }
  return d;
}

}  // namespace lathe::test
