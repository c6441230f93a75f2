// compute_channel_stats: one pass of sums and sums of squares per channel, in double.
#include "engine/data/channel_stats.h"

#include <cmath>

#include "engine/core/error.h"

namespace lathe {

ChannelStats compute_channel_stats(const Dataset& ds) {
  check_dataset_shape(ds);
  LATHE_CHECK(ds.count > 0, "compute_channel_stats: dataset '", ds.source, "' is empty");
  const int64_t plane = ds.plane();
  std::vector<double> sum(static_cast<size_t>(ds.channels), 0.0), sq(static_cast<size_t>(ds.channels), 0.0);
  for (int64_t i = 0; i < ds.count; ++i)
    for (int64_t c = 0; c < ds.channels; ++c) {
      double s = 0, q = 0;
      for (int64_t p = 0; p < plane; ++p) {
        const double v = ds.is_float() ? static_cast<double>(ds.float_image(i)[c * plane + p])
                                       : ds.image(i)[c * plane + p] / 255.0;
        s += v;
        q += v * v;
      }
      sum[static_cast<size_t>(c)] += s;
      sq[static_cast<size_t>(c)] += q;
    }
  ChannelStats st;
  const double n = static_cast<double>(ds.count) * static_cast<double>(plane);
  for (int64_t c = 0; c < ds.channels; ++c) {
    const double mean = sum[static_cast<size_t>(c)] / n;
    const double var = std::max(0.0, sq[static_cast<size_t>(c)] / n - mean * mean);
    const double std = std::sqrt(var);
    st.mean.push_back(static_cast<float>(mean));
    st.std.push_back(std < 1e-6 ? 1.0f : static_cast<float>(std));
  }
  return st;
}

void set_normalisation(Dataset& ds, const ChannelStats& stats) {
  LATHE_CHECK(static_cast<int64_t>(stats.mean.size()) == ds.channels && stats.std.size() == stats.mean.size(),
              "set_normalisation: ", stats.mean.size(), " means for ", ds.channels, " channels");
  ds.channel_mean = stats.mean;
  ds.channel_std = stats.std;
}

}  // namespace lathe
