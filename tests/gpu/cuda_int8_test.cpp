// What is particular to the GPU INT8 linear (cuBLASLt int8 GEMM, our pack and epilogue kernels):
// empty and changing batch sizes, recovery after a failed batch, grids wrapped by large sizes, and
// the quantize kernel's ties and NaN. Their parity with the reference backend's integers (u8 / s8
// inputs, f32 / s8 / u8+ReLU outputs, sizes on and off the 16-element padding) is in
// tests/backend/op_parity_test.cpp, with every backend. Label gpu: skipped with the reason
// without a device.
// Compiled only when the CUDA backend is linked (a CPU-only build still globs this folder).
#ifdef LATHE_HAVE_CUDA
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/backend/cpu/reference_int8.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "engine/backend/cuda/cuda_int8_linear.h"
#include "engine/compress/quant/int8_layer.h"
#include "kernels/int8_gemm_io.cuh"
#include "tests/gpu/gpu_test_support.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using gputest::CudaTest;

enum class Src { u8_zero_point, s8 };
enum class Dst { f32, s8, u8_relu };

/// Random quantized activations [n, k] in the src dtype (every integer of the range can occur).
Tensor random_q(int64_t n, int64_t k, const QuantParams& p, Rng& rng) {
  Tensor t = Tensor::empty({n, k}, p.storage_dtype());
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_flat(i, p.qmin() + static_cast<int64_t>(rng.below(static_cast<uint64_t>(p.qmax() - p.qmin() + 1))));
  return t;
}

class CudaInt8Test : public CudaTest {};

/// A u8 -> u8+ReLU layer with random weights (the kind the static plans chain).
Int8LayerData random_layer(int64_t k, int64_t o, Rng& rng) {
  const Tensor w = gputest::host_random({o, k}, rng, MemoryFormat::contiguous, 0.05);
  const Tensor b = gputest::host_random({o}, rng, MemoryFormat::contiguous, 0.1);
  Int8LayerConfig cfg;
  cfg.src = make_quant_params(-0.3, 2.2, 8, false, false);
  cfg.dst = make_quant_params(0.0, 3.0, 8, false, false);
  cfg.post = PostOp::relu;
  return make_int8_layer(w, &b, cfg);
}

TEST_F(CudaInt8Test, LinearHandlesEmptyBatchesAndChangingBatchSizes) {
  Rng rng(gputest::base_seed() + 7);
  const Int8LayerData layer = random_layer(40, 24, rng);
  cuda::CudaInt8Linear gpu_layer(gpu(), layer);
  // n = 0 launches nothing and returns [0, O]; the batch sizes around it still match the reference,
  // so the per-batch layouts, buffers and algorithm stay consistent as n changes back and forth.
  for (int64_t n : {int64_t{5}, int64_t{0}, int64_t{5}, int64_t{33}, int64_t{0}, int64_t{3}, int64_t{33}}) {
    SCOPED_TRACE(n);
    const Tensor x = random_q(n, 40, layer.config.src, rng);
    const Tensor got = gpu_layer.forward(up(x));
    ASSERT_EQ(got.shape(), (Shape{n, 24}));
    gpu().synchronize();
    if (n > 0)
      EXPECT_EQ(test::mismatches(down(got), int8_linear_reference(layer, x)), 0);
  }
}

TEST_F(CudaInt8Test, AFailedBatchSizeLeavesThePreviousOneWorking) {
  Rng rng(gputest::base_seed() + 9);
  const Int8LayerData layer = random_layer(40, 24, rng);
  cuda::CudaInt8Linear gpu_layer(gpu(), layer);
  const Tensor x = random_q(5, 40, layer.config.src, rng);
  const Tensor dx = up(x);
  const Tensor want = int8_linear_reference(layer, x);
  EXPECT_EQ(test::mismatches(down(gpu_layer.forward(dx)), want), 0);
  // 2^40 rows cannot be prepared (no algorithm, or no memory for the packed operand): it throws
  // before anything is launched, and must not leave layouts for 2^40 rows behind the 5-row state.
  Tensor big_out = gpu().empty({24}, DType::u8);
  EXPECT_THROW(gpu_layer.forward_rows(dx.raw(), DType::u8, int64_t{1} << 40, 40, big_out.raw()), Error);
  EXPECT_EQ(test::mismatches(down(gpu_layer.forward(dx)), want), 0) << "the 5-row batch after the failure";
}

TEST_F(CudaInt8Test, LinearWrapsTheGridOfItsPackAndEpilogueKernels) {
  Rng rng(gputest::base_seed() + 8);
  // 70000 x 64 packed bytes and 70000 x 32 outputs: over the 2^21 threads of a capped grid.
  const Int8LayerData layer = random_layer(64, 32, rng);
  const Tensor x = random_q(70000, 64, layer.config.src, rng);
  cuda::CudaInt8Linear gpu_layer(gpu(), layer);
  const Tensor got = down(gpu_layer.forward(up(x)));
  EXPECT_EQ(test::mismatches(got, int8_linear_reference(layer, x)), 0) << "of " << got.numel();
}

TEST_F(CudaInt8Test, QuantizeKernelMatchesQuantizeIncludingTiesAndNaN) {
  Rng rng(gputest::base_seed() + 1);
  const QuantParams p = make_quant_params(-0.5, 1.5, 8, false, false);
  Tensor x = gputest::host_random({4099}, rng);
  for (int64_t i = 0; i < 64; ++i)  // exact ties k + 0.5 steps, both signs, and NaN
    x.set_flat(i, (static_cast<double>(i) - 32 + 0.5) * p.scale[0]);
  x.set_flat(64, std::numeric_limits<double>::quiet_NaN());
  const Tensor want = quantize(x, p);
  const Tensor dx = up(x);
  Tensor dq = gpu().empty(x.shape(), DType::u8);
  LATHE_CUDA_CHECK(kernels::int8_quantize(gpu().context().stream(), static_cast<const float*>(dx.raw()), x.numel(),
                                          p.scale[0], p.zero_point[0], p.qmin(), p.qmax(), true, dq.raw()));
  const Tensor got = down(dq);
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(got.at_flat(i), want.at_flat(i)) << "element " << i << " x " << x.at_flat(i);
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
