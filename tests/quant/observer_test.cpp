// HistogramObserver growth (exact re-binning: total count and the mass of every bin, checked
// against the raw samples), zeros before any range, MinMaxObserver per tensor and per channel, and its
// vectorised blocks against the element-by-element definition (signed zeros, non-finite values, layouts).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/compress/quant/observer.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

Tensor from_values(const std::vector<double>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::f32);
  for (size_t i = 0; i < v.size(); ++i)
    t.set_flat(static_cast<int64_t>(i), v[i]);
  return t;
}

/// Every bin of `h` holds exactly the raw samples (absolute values if `absolute`) in its interval,
/// counted here by brute force from the samples, independently of the observer's binning.
void expect_bins_match_samples(const Histogram& h, const std::vector<float>& samples, bool absolute) {
  std::vector<double> expect(h.bins(), 0.0);
  for (float f : samples) {
    const double v = absolute ? std::fabs(static_cast<double>(f)) : f;
    for (int j = 0; j < h.bins(); ++j) {
      const bool last = j == h.bins() - 1;
      if (v >= h.edge(j) && (v < h.edge(j + 1) || (last && v <= h.hi))) {
        expect[j] += 1;
        break;
      }
    }
  }
  for (int j = 0; j < h.bins(); ++j)
    ASSERT_EQ(h.counts[j], expect[j]) << "bin " << j << " of [" << h.lo << ", " << h.hi << "]";
}

TEST(HistogramObserver, GrowingKeepsCountAndMassPerBin) {
  Rng rng(3);
  HistogramObserver obs(256);  // few bins so the brute-force check stays quick
  std::vector<float> all;
  auto batch = [&](double lo, double hi, int n) {
    std::vector<float> v(n);
    for (float& f : v)
      f = static_cast<float>(rng.uniform(lo, hi));
    all.insert(all.end(), v.begin(), v.end());
    obs.observe(v.data(), n);
  };
  batch(-1.0, 1.0, 5000);
  const Histogram abs1 = obs.abs_histogram(), sig1 = obs.histogram();
  EXPECT_GT(abs1.hi, obs.abs_max());  // the first range is tight, the max strictly inside
  EXPECT_NEAR(abs1.hi, obs.abs_max(), 1e-8);
  expect_bins_match_samples(obs.abs_histogram(), all, true);
  expect_bins_match_samples(obs.histogram(), all, false);

  batch(2.0, 5.3, 300);    // grows both histograms to the right
  batch(-7.5, -6.0, 200);  // grows the signed one to the left, the abs one again
  batch(-0.5, 0.5, 1000);  // inside: no growth
  const Histogram& a = obs.abs_histogram();
  const Histogram& s = obs.histogram();
  EXPECT_EQ(obs.count(), 6500);
  EXPECT_EQ(a.total(), 6500.0);
  EXPECT_EQ(s.total(), 6500.0);
  EXPECT_LE(a.lo, 0.0);
  EXPECT_GE(a.hi, 7.5 - 1e-6);
  EXPECT_LE(s.lo, obs.min());
  EXPECT_GE(s.hi, obs.max());
  // Integer width factor over the first range; the signed lower edge moved by whole old bins.
  const double k = a.bin_width() / abs1.bin_width();
  EXPECT_NEAR(k, std::round(k), 1e-9);
  const double shift = (sig1.lo - s.lo) / sig1.bin_width();
  EXPECT_NEAR(shift, std::round(shift), 1e-6);
  // Every bin, hence the mass of every original range, holds exactly its raw samples.
  expect_bins_match_samples(a, all, true);
  expect_bins_match_samples(s, all, false);
}

TEST(HistogramObserver, GrowHistogramHandComputed) {
  // 4 bins over [0, 4] holding [1, 2, 3, 4], grown to cover [-1, 6]: one old bin to the left
  // (lo = -1), then width x2 (8 bins' worth of old width reaches 7 >= 6): [-1, 7], bins of 2.
  // Old bin b lands in new bin (1 + b) / 2: [1, 2 + 3, 4, 0].
  Histogram h{0.0, 4.0, {1, 2, 3, 4}};
  grow_histogram(h, -1.0, 6.0);
  EXPECT_DOUBLE_EQ(h.lo, -1.0);
  EXPECT_DOUBLE_EQ(h.hi, 7.0);
  EXPECT_EQ(h.counts, (std::vector<double>{1, 5, 4, 0}));
  // Already covered: unchanged.
  grow_histogram(h, -1.0, 6.5);
  EXPECT_EQ(h.counts, (std::vector<double>{1, 5, 4, 0}));
  // A value on the top edge needs the next bin (half-open bins): width x2 again, [-1, 15].
  grow_histogram(h, -1.0, 7.0);
  EXPECT_DOUBLE_EQ(h.hi, 15.0);
  EXPECT_EQ(h.counts, (std::vector<double>{6, 4, 0, 0}));
  EXPECT_THROW(grow_histogram(h, 0.0, 7.0), Error);  // would shrink
}

TEST(HistogramObserver, ZerosBeforeAnyRangeAreKept) {
  HistogramObserver obs(64);
  obs.observe(Tensor::zeros({100}, DType::f32));
  EXPECT_FALSE(obs.abs_histogram().has_range());
  EXPECT_EQ(obs.zero_count(), 100);
  obs.observe(from_values({0.0, 0.5, -2.0, 1.0}));
  EXPECT_EQ(obs.count(), 104);
  EXPECT_EQ(obs.zero_count(), 101);
  EXPECT_EQ(obs.abs_histogram().total(), 104.0);
  EXPECT_EQ(obs.histogram().total(), 104.0);
  EXPECT_EQ(obs.abs_histogram().counts[0], 101.0);
  EXPECT_EQ(obs.histogram().counts[obs.histogram().bin_of(0.0)], 101.0);
  EXPECT_DOUBLE_EQ(obs.min(), -2.0);
  EXPECT_DOUBLE_EQ(obs.max(), 1.0);
}

TEST(HistogramObserver, RejectsNonFiniteAndWrongTypes) {
  HistogramObserver obs;
  EXPECT_THROW(obs.observe(from_values({1.0, std::nan("")})), Error);
  EXPECT_THROW(obs.observe(from_values({INFINITY})), Error);
  EXPECT_THROW(obs.observe(Tensor::zeros({3}, DType::s32)), Error);
  EXPECT_THROW(HistogramObserver(1), Error);
}

TEST(MinMaxObserver, PerTensorAndPerChannel) {
  MinMaxObserver all;
  MinMaxObserver rows(0), cols(1);
  Tensor a = from_values({1, -2, 3, 4, 5, -6}).view({2, 3});
  Tensor b = from_values({-7, 0, 0, 0, 9, 0}).view({2, 3});
  for (auto* o : {&all, &rows, &cols}) {
    o->observe(a);
    o->observe(b);
  }
  EXPECT_EQ(all.min(), std::vector<double>{-7});
  EXPECT_EQ(all.max(), std::vector<double>{9});
  EXPECT_EQ(rows.min(), (std::vector<double>{-7, -6}));
  EXPECT_EQ(rows.max(), (std::vector<double>{3, 9}));
  EXPECT_EQ(cols.min(), (std::vector<double>{-7, -2, -6}));
  EXPECT_EQ(cols.max(), (std::vector<double>{4, 9, 3}));
  const QuantParams p = rows.params(8, true, true);
  EXPECT_EQ(p.axis, 0);
  EXPECT_FLOAT_EQ(p.scale[0], 7.0f / 127);
  EXPECT_FLOAT_EQ(p.scale[1], 9.0f / 127);
  EXPECT_THROW(rows.observe(Tensor::zeros({3, 3}, DType::f32)), Error);  // 3 rows, 2 before
  EXPECT_THROW(MinMaxObserver(2).observe(a), Error);
  EXPECT_THROW(MinMaxObserver().params(), Error);
}

TEST(MinMaxObserver, ChannelsLastMatchesBruteForce) {
  Rng rng(11);
  const Tensor x = test::random_tensor({3, 5, 4, 6}, rng, DType::f32, MemoryFormat::channels_last, -3, 2);
  MinMaxObserver obs(1);
  obs.observe(x);
  for (int64_t c = 0; c < 5; ++c) {
    double mn = 1e9, mx = -1e9;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t w = 0; w < 6; ++w) {
          mn = std::min(mn, x.get({n, c, h, w}));
          mx = std::max(mx, x.get({n, c, h, w}));
        }
    EXPECT_EQ(obs.min()[c], mn);
    EXPECT_EQ(obs.max()[c], mx);
  }
}

/// MinMaxObserver's definition, element by element in memory order (a dense layout): min/max of
/// (double) values with std::min / std::max, channel = (offset / stride along axis) % channels.
void min_max_reference(const Tensor& x, int axis, std::vector<double>& lo, std::vector<double>& hi) {
  const int64_t channels = axis < 0 ? 1 : x.dim(axis), stride = axis < 0 ? 1 : x.stride(axis);
  if (lo.empty()) {
    lo.assign(channels, INFINITY);
    hi.assign(channels, -INFINITY);
  }
  const float* v = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = axis < 0 ? 0 : (i / stride) % channels;
    lo[c] = std::min(lo[c], static_cast<double>(v[i]));
    hi[c] = std::max(hi[c], static_cast<double>(v[i]));
  }
}

/// Bit for bit (so +0.0 and -0.0 differ).
void expect_same_bits(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t c = 0; c < got.size(); ++c)
    EXPECT_EQ(std::memcmp(&got[c], &want[c], sizeof(double)), 0)
        << what << " channel " << c << ": " << got[c] << " vs " << want[c];
}

TEST(MinMaxObserver, VectorisedBlocksEqualTheElementWiseDefinition) {
  Rng rng(5);
  // Weights [O, K] per tensor and per row (K >= 16: the vectorised blocks, with a tail of K % 8), per
  // column (stride 1: the element loop), a channels-last activation per channel, all observed twice.
  struct Case {
    Shape shape;
    MemoryFormat fmt;
    int axis;
  };
  const std::vector<Case> cases = {{{7, 37}, MemoryFormat::contiguous, -1}, {{7, 37}, MemoryFormat::contiguous, 0},
                                   {{7, 37}, MemoryFormat::contiguous, 1},  {{5, 3, 4, 4}, MemoryFormat::contiguous, 0},
                                   {{2, 3, 4, 8}, MemoryFormat::channels_last, 1},
                                   {{2, 3, 4, 8}, MemoryFormat::channels_last, 0}};
  for (const Case& k : cases) {
    MinMaxObserver obs(k.axis);
    std::vector<double> lo, hi;
    for (int round = 0; round < 2; ++round) {
      const Tensor x = test::random_tensor(k.shape, rng, DType::f32, k.fmt, -2 - round, 1 + round);
      obs.observe(x);
      min_max_reference(x, k.axis, lo, hi);
    }
    const std::string what = shape_str(k.shape) + " axis " + std::to_string(k.axis);
    expect_same_bits(obs.min(), lo, what + " min");
    expect_same_bits(obs.max(), hi, what + " max");
  }
}

TEST(MinMaxObserver, SignedZerosKeepTheSequentialOrder) {
  // std::min keeps the earlier of two equal values: a block of non-negative values whose least is a
  // zero gives the first zero's sign, and a zero already held stays. 40 values: vector lanes and a tail.
  for (const float first : {0.0f, -0.0f})
    for (const int at : {3, 17, 38}) {
      std::vector<double> v(40);
      for (int i = 0; i < 40; ++i)
        v[i] = 0.5 + i;
      v[at] = first;
      v[at < 20 ? 25 : 1] = -first;  // the other zero, elsewhere
      for (int axis : {-1, 0}) {
        const Tensor x = from_values(v).view({1, 40});
        MinMaxObserver obs(axis);
        obs.observe(x);
        std::vector<double> lo, hi;
        min_max_reference(x, axis, lo, hi);
        expect_same_bits(obs.min(), lo, "min, first zero " + std::to_string(first) + " at " + std::to_string(at));
        // All non-positive: the max is a zero, of the first zero's sign.
        std::vector<double> neg(v.size());
        for (size_t i = 0; i < v.size(); ++i)
          neg[i] = v[i] == 0 ? v[i] : -v[i];
        const Tensor y = from_values(neg).view({1, 40});
        MinMaxObserver obs2(axis);
        obs2.observe(y);
        std::vector<double> lo2, hi2;
        min_max_reference(y, axis, lo2, hi2);
        expect_same_bits(obs2.max(), hi2, "max");
        // Then zeros of the other sign only: the zero already held stays.
        const Tensor z = from_values(std::vector<double>(20, -first)).view({1, 20});
        obs.observe(z);
        min_max_reference(z, axis, lo, hi);
        expect_same_bits(obs.min(), lo, "min after a block of zeros");
        expect_same_bits(obs.max(), hi, "max after a block of zeros");
      }
    }
}

TEST(MinMaxObserver, ANonFiniteValueIsNamedWhereverItIs) {
  for (const double bad : {std::nan(""), static_cast<double>(INFINITY), -static_cast<double>(INFINITY)})
    for (const int at : {0, 20, 39}) {
      std::vector<double> v(40, 1.5);
      v[at] = bad;
      for (int axis : {-1, 0}) {
        MinMaxObserver obs(axis);
        try {
          obs.observe(from_values(v).view({2, 20}));
          ADD_FAILURE() << "no error for " << bad << " at " << at;
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("non-finite value"), std::string::npos) << e.what();
        }
      }
    }
}

}  // namespace
}  // namespace lathe
