// Pruning masks: exact zero counts (global vs per layer), the smallest magnitudes chosen across layers,
// deterministic ties, exclusions, N:M groups along the input dimension, and the invariant that pruned
// weights stay exactly zero through SGD with momentum when gradients and state are masked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/compress/prune/mask.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/zoo.h"
#include "engine/exec/batch_loop.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

std::unique_ptr<Model> make(std::unique_ptr<Model> m, ReferenceBackend& be, uint64_t seed = 0) {
  Rng rng(seed);
  m->create_params(be, DType::f32, rng);
  return m;
}

Tensor& weight(Model& m, const std::string& name) {
  for (auto& np : m.named_params())
    if (np.name == name)
      return np.param->value;
  throw std::runtime_error("no param " + name);
}

int64_t zeros_of(const Tensor& t) {
  int64_t z = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    z += t.at_flat(i) == 0.0;
  return z;
}

/// Two Linear layers "0" [2, 4] and "1" [2, 2] with hand-set weights.
std::unique_ptr<Model> two_linears(ReferenceBackend& be, const std::vector<double>& w0, const std::vector<double>& w1) {
  auto m = make(build_model_from_layers(nlohmann::json::parse(R"([{"type": "linear", "out": 2},
                                                                  {"type": "linear", "out": 2}])"),
                                        {4}),
                be);
  for (int64_t i = 0; i < 8; ++i)
    weight(*m, "0.weight").set_flat(i, w0[i]);
  for (int64_t i = 0; i < 4; ++i)
    weight(*m, "1.weight").set_flat(i, w1[i]);
  return m;
}

std::vector<int> keep_of(const std::vector<PruneMask>& masks, const std::string& name) {
  for (const auto& m : masks)
    if (m.param == name) {
      std::vector<int> k;
      for (int64_t i = 0; i < m.keep.numel(); ++i)
        k.push_back(static_cast<int>(m.keep.at_flat(i)));
      return k;
    }
  return {};
}

TEST(MagnitudeMasks, ExactZeroCountsPerLayerAndGlobal) {
  ReferenceBackend be;
  auto m = make(build_zoo_model("student"), be);  // 0.weight [64, 784], 2.weight [10, 64]
  ASSERT_EQ(zeros_of(weight(*m, "0.weight")), 0);
  {
    auto masks = magnitude_masks(*m, 0.3, /*global=*/false);
    ASSERT_EQ(masks.size(), 2u);
    EXPECT_EQ(masks[0].param, "0.weight");
    EXPECT_EQ(masks[1].param, "2.weight");
    EXPECT_EQ(masks[0].keep.dtype(), DType::u8);
    EXPECT_EQ(zeros_of(masks[0].keep), 15053);  // round(0.3 * 50176 = 15052.8)
    EXPECT_EQ(zeros_of(masks[1].keep), 192);    // 0.3 * 640
  }
  auto masks = magnitude_masks(*m, 0.3, /*global=*/true);
  EXPECT_EQ(zeros_of(masks[0].keep) + zeros_of(masks[1].keep), 15245);  // round(0.3 * 50816 = 15244.8)
  apply_masks(*m, masks);
  const SparsityReport r = sparsity_report(*m);
  ASSERT_EQ(r.params.size(), 2u);
  EXPECT_EQ(r.params[0].name, "0.weight");
  EXPECT_EQ(r.params[0].total, 50176);
  EXPECT_EQ(r.params[1].total, 640);
  EXPECT_EQ(r.zeros, 15245);
  EXPECT_EQ(r.total, 50816);
  EXPECT_DOUBLE_EQ(r.overall(), 15245.0 / 50816);
  EXPECT_EQ(zeros_of(weight(*m, "0.bias")), 0);  // biases are never pruned
  EXPECT_EQ(zeros_of(weight(*m, "2.bias")), 0);
  EXPECT_DOUBLE_EQ(sparsity(weight(*m, "2.weight")), r.params[1].fraction());
}

TEST(MagnitudeMasks, GlobalTakesTheSmallestMagnitudesAcrossLayers) {
  ReferenceBackend be;
  // Layer 0 holds the large magnitudes, layer 1 the small ones.
  auto m = two_linears(be, {1, -2, 3, -4, 5, -6, 7, -8}, {0.1, -0.2, 0.3, -0.4});
  const auto global = magnitude_masks(*m, 0.5, true);  // 6 of 12: all of layer 1, then |1| and |-2|
  EXPECT_EQ(keep_of(global, "0.weight"), (std::vector<int>{0, 0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(keep_of(global, "1.weight"), (std::vector<int>{0, 0, 0, 0}));
  const auto local = magnitude_masks(*m, 0.5, false);  // 4 of 8 and 2 of 4
  EXPECT_EQ(keep_of(local, "0.weight"), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(keep_of(local, "1.weight"), (std::vector<int>{0, 0, 1, 1}));
  apply_masks(*m, global);
  EXPECT_EQ(weight(*m, "0.weight").at_flat(2), 3.0f);
  EXPECT_EQ(weight(*m, "0.weight").at_flat(1), 0.0f);
}

TEST(MagnitudeMasks, TiesAreBrokenByPosition) {
  ReferenceBackend be;
  auto m = two_linears(be, {1, 1, -1, 1, 1, 1, 1, 1}, {1, -1, 1, 1});
  const auto masks = magnitude_masks(*m, 0.25, true);  // 3 of 12, all |w| = 1: the first three
  EXPECT_EQ(keep_of(masks, "0.weight"), (std::vector<int>{0, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(keep_of(masks, "1.weight"), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(keep_of(magnitude_masks(*m, 0.25, false), "1.weight"), (std::vector<int>{0, 1, 1, 1}));
}

TEST(MagnitudeMasks, ExclusionsAreRespectedAndChecked) {
  ReferenceBackend be;
  auto m = make(build_zoo_model("student"), be);
  const Tensor before = weight(*m, "2.weight").contiguous_copy();
  for (const std::string ex : {"2", "2.weight"}) {
    const auto masks = magnitude_masks(*m, 0.9, true, {ex});
    ASSERT_EQ(masks.size(), 1u);
    EXPECT_EQ(masks[0].param, "0.weight");
    EXPECT_EQ(zeros_of(masks[0].keep), std::llround(0.9 * 50176));
    apply_masks(*m, masks);
  }
  EXPECT_TRUE(test::all_close(weight(*m, "2.weight"), before, 0, 0));
  EXPECT_THROW(magnitude_masks(*m, 0.5, true, {"1"}), ConfigError);  // a ReLU: nothing to prune
  EXPECT_THROW(magnitude_masks(*m, 0.5, true, {"0.bias"}), ConfigError);
  EXPECT_THROW(magnitude_masks(*m, 1.5, true), ConfigError);
  EXPECT_THROW(magnitude_masks(*m, -0.1, false), ConfigError);
  EXPECT_TRUE(magnitude_masks(*m, 0.5, true, {"0", "2"}).empty());
  EXPECT_EQ(zeros_of(magnitude_masks(*m, 1.0, false)[1].keep), 640);
}

TEST(NmMasks, HandGroup) {
  ReferenceBackend be;
  auto m = make(build_model_from_layers(nlohmann::json::parse(R"([{"type": "linear", "out": 1}])"), {8}), be);
  const std::vector<double> w{3, -1, 2, 0.5, -0.1, 0.2, -0.3, 0.4};
  for (int64_t i = 0; i < 8; ++i)
    weight(*m, "0.weight").set_flat(i, w[i]);
  EXPECT_EQ(keep_of(nm_masks(*m), "0.weight"), (std::vector<int>{1, 0, 1, 0, 0, 0, 1, 1}));
  EXPECT_EQ(keep_of(nm_masks(*m, 1, 4), "0.weight"), (std::vector<int>{1, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(keep_of(nm_masks(*m, 1, 2), "0.weight"), (std::vector<int>{1, 0, 1, 0, 0, 1, 0, 1}));
  EXPECT_THROW(nm_masks(*m, 0, 4), ConfigError);
  EXPECT_THROW(nm_masks(*m, 5, 4), ConfigError);
}

TEST(NmMasks, EveryGroupOfFourAlongTheInputDimensionKeepsItsTwoLargest) {
  ReferenceBackend be;
  // conv 0.weight [3, 8, 3, 3] (groups over C at each (o, kh, kw)); linear 2.weight [5, 48].
  auto m = make(build_model_from_layers(nlohmann::json::parse(R"([{"type": "conv2d", "out": 3, "kernel": 3},
      {"type": "flatten"}, {"type": "linear", "out": 5}])"),
                                        {8, 6, 6}),
                be, 7);
  const auto masks = nm_masks(*m, 2, 4);
  ASSERT_EQ(masks.size(), 2u);
  auto check_group = [&](const Tensor& w, const Tensor& keep, std::vector<int64_t> idx, int axis) {
    std::vector<double> pruned, kept;
    int zeros = 0;
    for (int j = 0; j < 4; ++j) {
      std::vector<int64_t> at = idx;
      at[axis] += j;
      const double mag = std::fabs(w.get(at));
      (keep.get(at) ? kept : pruned).push_back(mag);
      zeros += keep.get(at) == 0;
    }
    EXPECT_EQ(zeros, 2);
    if (zeros == 2)
      EXPECT_LE(*std::max_element(pruned.begin(), pruned.end()), *std::min_element(kept.begin(), kept.end()));
  };
  const Tensor& cw = weight(*m, "0.weight");
  ASSERT_EQ(masks[0].param, "0.weight");
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t c = 0; c < 8; c += 4)
      for (int64_t kh = 0; kh < 3; ++kh)
        for (int64_t kw = 0; kw < 3; ++kw)
          check_group(cw, masks[0].keep, {o, c, kh, kw}, 1);
  const Tensor& lw = weight(*m, "2.weight");
  for (int64_t o = 0; o < 5; ++o)
    for (int64_t k = 0; k < 48; k += 4)
      check_group(lw, masks[1].keep, {o, k}, 1);
  EXPECT_EQ(zeros_of(masks[0].keep), 3 * 8 * 9 / 2);
  EXPECT_EQ(zeros_of(masks[1].keep), 5 * 48 / 2);
}

TEST(NmMasks, RejectsAGroupDimensionThatIsNotAMultipleOfM) {
  ReferenceBackend be;
  auto m = make(build_model_from_layers(nlohmann::json::parse(R"([{"type": "linear", "out": 8},
      {"name": "head", "type": "linear", "out": 2}])"),
                                        {6}),
                be);
  try {
    nm_masks(*m);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'0.weight'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(nm_masks(*m, 2, 4, {"0"}).size(), 1u);  // head [2, 8] is fine
  EXPECT_EQ(nm_masks(*m, 1, 2).size(), 2u);
}

TEST(MaskInvariants, PrunedWeightsStayZeroThroughSgdWithMomentum) {
  ReferenceBackend be;
  auto m = make(build_zoo_model("student"), be, 3);
  const auto masks = magnitude_masks(*m, 0.6, true);
  apply_masks(*m, masks);
  const int64_t zeros = sparsity_report(*m).zeros;
  EXPECT_EQ(zeros, std::llround(0.6 * 50816));
  Sgd sgd(0.9, 1e-3, false);
  Rng rng(11);
  Tensor labels = Tensor::empty({8}, DType::s32);
  for (int step = 0; step < 3; ++step) {
    Tensor x = test::random_tensor({8, 784}, rng);
    for (int64_t i = 0; i < 8; ++i)
      labels.data<int32_t>()[i] = static_cast<int32_t>(rng.uniform() * 10) % 10;
    LayerContext ctx{be, true, static_cast<uint64_t>(step)};
    Tensor diff;
    forward_backward(*m, ctx, x, labels, 1.0 / 8, diff);
    // The test can fail: unmasked, the pruned entries do get gradient.
    int64_t live = 0;
    const Tensor& g = m->named_params()[0].param->grad;
    for (int64_t i = 0; i < g.numel(); ++i)
      live += masks[0].keep.at_flat(i) == 0 && g.at_flat(i) != 0.0;
    EXPECT_GT(live, 0);
    mask_gradients(*m, masks);
    sgd.step(be, m->named_params(), 0.1);
  }
  EXPECT_EQ(sparsity_report(*m).zeros, zeros);
  for (const auto& mk : masks) {
    const Tensor& w = weight(*m, mk.param);
    for (int64_t i = 0; i < w.numel(); ++i)
      if (!mk.keep.at_flat(i))
        ASSERT_EQ(w.at_flat(i), 0.0) << mk.param << " element " << i;
  }
}

TEST(MaskInvariants, PruningAfterTrainingMustAlsoMaskTheMomentum) {
  // Prune a model whose SGD momentum is already non-zero (pruning after training): with the
  // momentum masked through Optimizer::state_of, pruned weights stay zero; without, they drift.
  for (bool mask_momentum : {true, false}) {
    ReferenceBackend be;
    auto m = make(build_zoo_model("student"), be, 4);
    Sgd sgd(0.9, 0.0, false);
    Rng rng(12);
    Tensor labels = Tensor::empty({8}, DType::s32);
    auto step = [&](const std::vector<PruneMask>* masks) {
      Tensor x = test::random_tensor({8, 784}, rng);
      for (int64_t i = 0; i < 8; ++i)
        labels.data<int32_t>()[i] = static_cast<int32_t>(i % 10);
      LayerContext ctx{be, true, 0};
      Tensor diff;
      forward_backward(*m, ctx, x, labels, 1.0 / 8, diff);
      if (masks)
        mask_gradients(*m, *masks);
      sgd.step(be, m->named_params(), 0.1);
    };
    step(nullptr);
    step(nullptr);
    const auto masks = magnitude_masks(*m, 0.5, true);
    apply_masks(*m, masks);
    if (mask_momentum) {
      std::map<std::string, Param*> by_name;
      for (auto& np : m->named_params())
        by_name[np.name] = np.param;
      mask_state(masks, [&](const std::string& name) -> Tensor* {
        auto st = sgd.state_of(by_name.at(name));
        return st.empty() ? nullptr : st[0];
      });
    }
    const int64_t zeros = sparsity_report(*m).zeros;
    step(&masks);
    if (mask_momentum) {
      EXPECT_EQ(sparsity_report(*m).zeros, zeros);
    } else {
      EXPECT_LT(sparsity_report(*m).zeros, zeros);  // the test can tell the difference
    }
  }
}

TEST(MaskInvariants, MaskStateZerosPerParamTensorsAndSkipsMissingOnes) {
  ReferenceBackend be;
  auto m = two_linears(be, {1, -2, 3, -4, 5, -6, 7, -8}, {0.1, -0.2, 0.3, -0.4});
  const auto masks = magnitude_masks(*m, 0.5, false);
  std::map<std::string, Tensor> state;
  state["0.weight"] = Tensor::empty({2, 4}, DType::f32);
  state["0.weight"].fill(2.5);
  mask_state(masks, [&](const std::string& name) -> Tensor* {
    auto it = state.find(name);
    return it == state.end() ? nullptr : &it->second;
  });
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(state["0.weight"].at_flat(i), i < 4 ? 0.0 : 2.5) << i;
  Tensor wrong = Tensor::zeros({4, 2}, DType::f32);
  EXPECT_THROW(mask_tensor(wrong, masks[0]), Error);
  PruneMask stray{"9.weight", masks[0].keep};
  EXPECT_THROW(apply_masks(*m, {stray}), Error);
}

TEST(MaskInvariants, MaskTensorZerosExactlyThePrunedElementsInEveryLayoutAndType) {
  // The f32 row-major fast path and the element-wise path (channels-last, bf16) must agree with the
  // definition: element i (row-major) becomes +0.0 where keep[i] is 0 and keeps its bits elsewhere.
  const Shape shape{3, 5, 2, 2};  // a conv weight [O, C, KH, KW]
  const int64_t n = 60;
  PruneMask mask{"w", Tensor::empty(shape, DType::u8)};
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    mask.keep.data<uint8_t>()[i] = (i * 7 % 11) < 5 ? 1 : 0;
    v[i] = (i % 3 == 0 ? -1.0 : 1.0) * (0.25 + i);  // negatives: a pruned one must not become -0.0
  }
  v[4] = std::nan("");  // a NaN is zeroed where pruned, kept where not
  v[5] = std::nan("");
  for (const DType dt : {DType::f32, DType::bf16})
    for (const MemoryFormat mf : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
      Tensor t = Tensor::empty(shape, dt, Device::cpu(), mf);
      for (int64_t i = 0; i < n; ++i)
        t.set_flat(i, v[i]);
      mask_tensor(t, mask);
      for (int64_t i = 0; i < n; ++i) {
        const double got = t.at_flat(i);
        if (!mask.keep.data<uint8_t>()[i]) {
          EXPECT_EQ(got, 0.0) << i;
          EXPECT_FALSE(std::signbit(got)) << i;
        } else if (std::isnan(v[i])) {
          EXPECT_TRUE(std::isnan(got)) << i;
        } else {
          EXPECT_EQ(got, v[i]) << i;  // all exact in bf16 too (small integers + 0.25)
        }
      }
    }
  ASSERT_FALSE(mask.keep.data<uint8_t>()[4] && mask.keep.data<uint8_t>()[5]);  // one NaN is pruned
}

TEST(MaskInvariants, MaskTensorSliceZerosTheSliceOfAZeroOneRank) {
  // A ZeRO-1 rank's momentum is a 1-D slice of the weight's elements from some offset on.
  PruneMask mask{"w", Tensor::empty({2, 4}, DType::u8)};
  const uint8_t keep[8] = {1, 0, 0, 1, 1, 1, 0, 1};
  for (int64_t i = 0; i < 8; ++i)
    mask.keep.data<uint8_t>()[i] = keep[i];
  Tensor slice = Tensor::empty({5}, DType::f32);  // elements 2..6
  slice.fill(1.5);
  mask_tensor_slice(slice, mask, 2);
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(slice.at_flat(i), keep[i + 2] ? 1.5 : 0.0) << i;
  EXPECT_THROW(mask_tensor_slice(slice, mask, 4), Error);  // would end at element 9 of 8
  Tensor two_d = Tensor::zeros({1, 5}, DType::f32);
  EXPECT_THROW(mask_tensor_slice(two_d, mask, 0), Error);
}

TEST(Sparsity, CountsExactZerosIncludingNegativeZero) {
  Tensor t = Tensor::empty({2, 4}, DType::f32);
  const std::vector<double> v{0, 1, -0.0, 1e-30, 2, 0, 3, 4};
  for (int64_t i = 0; i < 8; ++i)
    t.set_flat(i, v[i]);
  EXPECT_DOUBLE_EQ(sparsity(t), 3.0 / 8);
  EXPECT_DOUBLE_EQ(sparsity(Tensor::zeros({0}, DType::f32)), 0.0);
}

TEST(Sparsity, TheVectorisedCountEqualsTheDefinitionInEveryLayoutAndType) {
  // sparsity() and sparsity_report() count elements equal to zero: +0.0 and -0.0, not NaN, not a
  // subnormal. The f32 dense fast path (contiguous and channels-last memory) and the
  // element-wise path (bf16) must agree with a count through Tensor::at_flat.
  const Shape shape{4, 3, 3, 3};
  const int64_t n = 108;
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = i % 5 == 0 ? 0.0 : (i % 2 ? 1.0 : -1.0) * (0.5 + i);
  v[1] = -0.0;
  v[2] = std::nan("");
  v[3] = 1e-40;  // a subnormal in f32 and in bf16: not zero
  v[7] = -std::numeric_limits<double>::infinity();
  for (const DType dt : {DType::f32, DType::bf16})
    for (const MemoryFormat mf : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
      Tensor t = Tensor::empty(shape, dt, Device::cpu(), mf);
      for (int64_t i = 0; i < n; ++i)
        t.set_flat(i, v[i]);
      int64_t want = 0;
      for (int64_t i = 0; i < n; ++i)
        want += t.at_flat(i) == 0.0;
      ASSERT_EQ(want, 23) << "22 multiples of 5 and the -0.0";
      EXPECT_DOUBLE_EQ(sparsity(t), static_cast<double>(want) / n) << dtype_name(dt);
    }
  // sparsity_report over a model's prunable weights, against the same definition.
  ReferenceBackend be;
  auto m = make(build_zoo_model("mlp", {1, 28, 28}, 10), be, 3);
  Tensor& w = weight(*m, m->named_params()[0].name);
  for (int64_t i = 0; i < w.numel(); i += 3)
    w.set_flat(i, i % 2 ? -0.0 : 0.0);
  const SparsityReport r = sparsity_report(*m);
  int64_t zeros = 0, total = 0;
  for (const NamedParam& np : prunable_weights(*m)) {
    for (int64_t i = 0; i < np.param->value.numel(); ++i)
      zeros += np.param->value.at_flat(i) == 0.0;
    total += np.param->value.numel();
  }
  EXPECT_EQ(r.zeros, zeros);
  EXPECT_EQ(r.total, total);
  EXPECT_EQ(r.params[0].zeros, (w.numel() + 2) / 3);
}

}  // namespace
}  // namespace lathe
