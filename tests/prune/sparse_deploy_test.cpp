// The deployed sparse form: a pruned mlp and cnn give the same outputs with the sparse executors
// swapped in (forced sparse, forced dense and measured) as the dense model on oneDNN, for several
// batch sizes and channels-last inputs; restore() brings back the dense layers; the executors
// refuse backward; the measured mode records one choice per batch size.
#include <gtest/gtest.h>

#include "engine/backend/backend.h"
#include "engine/compress/prune/mask.h"
#include "engine/compress/prune/sparse_deploy.h"
#include "engine/nn/zoo.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

std::unique_ptr<Model> pruned(const std::string& zoo, Backend& be, double sparsity) {
  auto m = build_zoo_model(zoo);
  Rng rng(5);
  m->create_params(be, DType::f32, rng);
  apply_masks(*m, magnitude_masks(*m, sparsity, /*global=*/false));
  return m;
}

Tensor forward(Model& m, Backend& be, const Tensor& x) {
  LayerContext ctx{be, /*training=*/false};
  return m.forward(ctx, x).contiguous_copy();
}

void check_model(const std::string& zoo, double sparsity, MemoryFormat fmt) {
  auto be = make_backend("cpu");
  auto model = pruned(zoo, *be, sparsity);
  const size_t prunable = prunable_weights(*model).size();
  Rng rng(6);
  for (int64_t batch : {1, 3, 40}) {
    SCOPED_TRACE(testing::Message() << zoo << " sparsity " << sparsity << " batch " << batch);
    const Tensor x = test::random_tensor({batch, 1, 28, 28}, rng, DType::f32, fmt);
    const Tensor want = forward(*model, *be, x);
    for (SparseKernelMode mode :
         {SparseKernelMode::always_sparse, SparseKernelMode::always_dense, SparseKernelMode::measured}) {
      if (mode == SparseKernelMode::measured && batch != 3)
        continue;  // the measured choice times every layer: once is enough for a unit test
      SparseDeployment dep(*model, {1.0, mode});
      ASSERT_EQ(dep.layers().size(), prunable);
      EXPECT_TRUE(test::all_close(forward(*model, *be, x), want, 1e-4, 1e-5));
      if (mode == SparseKernelMode::measured)
        for (const auto& s : dep.layers())
          EXPECT_EQ(s.executor->choices().count(batch), 1u) << s.name;
    }
    EXPECT_TRUE(test::all_close(forward(*model, *be, x), want, 0, 0)) << "restore() must bring the dense layers back";
  }
}

TEST(SparseDeploy, MlpMatchesDense) { check_model("mlp", 0.8, MemoryFormat::contiguous); }
TEST(SparseDeploy, CnnMatchesDense) { check_model("cnn", 0.7, MemoryFormat::contiguous); }
TEST(SparseDeploy, CnnChannelsLastInputMatchesDense) { check_model("cnn", 0.9, MemoryFormat::channels_last); }

TEST(SparseDeploy, ConvExecutorsKeepTheBackendsConvLayout) {
  // A sparse conv that wrote NCHW behind a channels-last model made oneDNN's dense path fall back
  // to a reference convolution (200x slower): the executor must write what the Conv2d wrote.
  auto be = make_backend("cpu");
  auto model = pruned("cnn", *be, 0.8);
  SparseDeployment dep(*model, {1.0, SparseKernelMode::always_dense});
  int convs = 0;
  for (const auto& s : dep.layers())
    if (s.executor->kind() == "sparse_conv2d") {
      ++convs;
      EXPECT_EQ(s.executor->output_format(*be, {}), s.dense->output_format(*be, {})) << s.name;
    }
  EXPECT_EQ(convs, 2);
}

TEST(SparseDeploy, DenseEnoughLayersStayDenseAndExecutorsRefuseBackward) {
  auto be = make_backend("cpu");
  auto model = pruned("mlp", *be, 0.5);
  apply_masks(*model, magnitude_masks(*model, 0.9, false, {"0", "2"}));  // only "4" at 10% density
  SparseDeployment dep(*model, {0.45, SparseKernelMode::always_sparse});
  ASSERT_EQ(dep.layers().size(), 1u);
  EXPECT_EQ(dep.layers()[0].name, "4");
  EXPECT_NEAR(dep.layers()[0].executor->density(), 0.1, 1e-3);
  EXPECT_EQ(model->layer(4).kind(), "sparse_linear");
  LayerContext ctx{*be, false};
  Tensor y = be->empty({2, 10}, DType::f32);
  EXPECT_THROW(model->layer(4).backward(ctx, {}, y, y, {nullptr}), Error);
  dep.restore();
  EXPECT_EQ(model->layer(4).kind(), "linear");
}

TEST(SparseDeploy, Im2colMatchesDirectIndexing) {
  Rng rng(7);
  const Tensor x = test::random_tensor({1, 3, 7, 6}, rng, DType::f32, MemoryFormat::channels_last);
  const ConvParams p{2, 2, 1, 1};
  const int64_t k = 3, oh = conv_out_size(7, k, 2, 1), ow = conv_out_size(6, k, 2, 1);
  std::vector<float> col(3 * k * k * oh * ow);
  im2col(x.data<float>(), 3, 7, 6, x.stride(1), x.stride(2), x.stride(3), k, p, col.data());
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t kh = 0; kh < k; ++kh)
      for (int64_t kw = 0; kw < k; ++kw)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t iy = y * 2 - 1 + kh, ix = xo * 2 - 1 + kw;
            const double want = iy >= 0 && iy < 7 && ix >= 0 && ix < 6 ? x.get({0, c, iy, ix}) : 0.0;
            ASSERT_EQ(col[((c * k + kh) * k + kw) * oh * ow + y * ow + xo], want);
          }
}

}  // namespace
}  // namespace lathe
