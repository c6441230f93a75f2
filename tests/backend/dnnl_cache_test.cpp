// The oneDNN backend's primitive cache: a repeated call reuses its primitive (op parity with the
// reference, for every backend, is tests/backend/op_parity_test.cpp).
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::random_tensor;

TEST(DnnlBackendCache, PrimitivesAreCachedAcrossCalls) {
  DnnlBackend cpu;
  Rng rng{1234};
  Tensor x = random_tensor({8, 16}, rng), w = random_tensor({4, 16}, rng), y = Tensor::empty({8, 4}, DType::f32);
  cpu.linear_forward(x, w, nullptr, y, PostOp::none);
  const size_t after_first = cpu.primitives_created();
  for (int i = 0; i < 5; ++i)
    cpu.linear_forward(x, w, nullptr, y, PostOp::none);
  EXPECT_EQ(cpu.primitives_created(), after_first);
}

}  // namespace
}  // namespace lathe
