// Per-channel normalisation statistics of a dataset: the mean and standard deviation of each
// channel's intensities (u8 / 255 or the f32 values), over every pixel of every image, computed on
// the training split and then used for both splits.
#pragma once

#include <vector>

#include "engine/data/dataset.h"

namespace lathe {

struct ChannelStats {
  std::vector<float> mean, std;  // one per channel; population std (divided by the pixel count)
};

/// Computed in double. A channel with std below 1e-6 (constant) gets std 1, so it is only shifted.
/// Throws lathe::Error for an empty dataset.
ChannelStats compute_channel_stats(const Dataset& ds);

/// Sets ds.channel_mean / channel_std.
void set_normalisation(Dataset& ds, const ChannelStats& stats);

}  // namespace lathe
