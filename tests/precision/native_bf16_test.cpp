// The native oneDNN bf16 path (real bf16 tensors on AVX512_BF16/AMX CPUs) against the reference
// backend on the same bf16 tensors, op by op. Skips, saying why, on CPUs without bf16 instructions
// (there the layers emulate bf16, which mixed_precision_layers_test covers).
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "tests/support/native_bf16.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::all_close;

Tensor random_bf16(const Shape& s, Rng& rng, MemoryFormat fmt = MemoryFormat::contiguous) {
  return test::random_tensor(s, rng, DType::bf16, fmt);
}

class NativeBf16 : public ::testing::Test {
 protected:
  ReferenceBackend ref;
  DnnlBackend cpu;
  Rng rng{21};
  void SetUp() override {
    if (const std::string why = test::no_native_bf16_reason(cpu); !why.empty())
      GTEST_SKIP() << why;
  }
};

TEST_F(NativeBf16, Linear) {
  const int64_t N = 33, K = 70, O = 17;
  const Tensor x = random_bf16({N, K}, rng), w = random_bf16({O, K}, rng), dy = random_bf16({N, O}, rng);
  const Tensor b = test::random_tensor({O}, rng);
  Tensor y0 = Tensor::empty({N, O}, DType::f32), y1 = Tensor::empty({N, O}, DType::f32);
  ref.linear_forward(x, w, &b, y0, PostOp::relu);
  cpu.linear_forward(x, w, &b, y1, PostOp::relu);
  EXPECT_TRUE(all_close(y1, y0, 1e-4, 1e-4));
  Tensor dx0 = Tensor::empty({N, K}, DType::f32), dx1 = Tensor::empty({N, K}, DType::f32);
  ref.linear_backward_data(dy, w, dx0);
  cpu.linear_backward_data(dy, w, dx1);
  EXPECT_TRUE(all_close(dx1, dx0, 1e-4, 1e-4));
  Tensor dw0 = Tensor::empty({O, K}, DType::f32), dw1 = Tensor::empty({O, K}, DType::f32);
  Tensor db0 = Tensor::empty({O}, DType::f32), db1 = Tensor::empty({O}, DType::f32);
  ref.linear_backward_weights(x, dy, dw0, &db0);
  cpu.linear_backward_weights(x, dy, dw1, &db1);
  EXPECT_TRUE(all_close(dw1, dw0, 1e-4, 1e-4));
  EXPECT_TRUE(all_close(db1, db0, 1e-4, 1e-4));
}

TEST_F(NativeBf16, ConvChannelsLast) {
  const int64_t N = 3, C = 16, H = 9, W = 9, O = 32, Kk = 3;
  const ConvParams p{1, 1, 1, 1};
  const auto cl = MemoryFormat::channels_last;
  const Tensor x = random_bf16({N, C, H, W}, rng, cl), w = random_bf16({O, C, Kk, Kk}, rng);
  const Tensor dy = random_bf16({N, O, H, W}, rng, cl), b = test::random_tensor({O}, rng);
  Tensor y0 = Tensor::empty({N, O, H, W}, DType::f32, Device::cpu(), cl);
  Tensor y1;
  y1 = Tensor::empty({N, O, H, W}, DType::f32, Device::cpu(), cl);
  ref.conv2d_forward(p, x, w, &b, y0, PostOp::none);
  cpu.conv2d_forward(p, x, w, &b, y1, PostOp::none);
  EXPECT_TRUE(all_close(y1, y0, 1e-4, 1e-4));
  Tensor dx0 = Tensor::empty({N, C, H, W}, DType::f32, Device::cpu(), cl);
  Tensor dx1 = Tensor::empty({N, C, H, W}, DType::f32, Device::cpu(), cl);
  ref.conv2d_backward_data(p, dy, w, dx0);
  cpu.conv2d_backward_data(p, dy, w, dx1);
  EXPECT_TRUE(all_close(dx1, dx0, 1e-4, 1e-4));
  Tensor dw0 = Tensor::empty({O, C, Kk, Kk}, DType::f32), dw1 = Tensor::empty({O, C, Kk, Kk}, DType::f32);
  Tensor db0 = Tensor::empty({O}, DType::f32), db1 = Tensor::empty({O}, DType::f32);
  ref.conv2d_backward_weights(p, x, dy, dw0, &db0);
  cpu.conv2d_backward_weights(p, x, dy, dw1, &db1);
  EXPECT_TRUE(all_close(dw1, dw0, 1e-4, 1e-3));
  EXPECT_TRUE(all_close(db1, db0, 1e-4, 1e-3));
}

}  // namespace
}  // namespace lathe
