// cuSPARSE SpMM parity: C = A * B on the GPU against the CPU double-precision reference
// (spmm_reference) at densities 0..1 and odd shapes; skips with the runtime's reason without a GPU.
// Compiled only when the CUDA backend is linked (a CPU-only build still globs this folder).
#ifdef LATHE_HAVE_CUDA
#include "engine/backend/cpu/spmm.h"
#include "engine/backend/cuda/cusparse_ops.h"
#include "tests/gpu/gpu_test_support.h"

namespace lathe::gputest {
namespace {

class CusparseTest : public CudaTest {};

TEST_F(CusparseTest, SpmmMatchesCpuReference) {
  Rng rng(base_seed());
  struct Case {
    int64_t rows, cols, n;
    double density;
  };
  for (const Case& c : std::vector<Case>{{1, 1, 1, 1.0},
                                         {7, 13, 5, 0.3},
                                         {64, 288, 196, 0.2},
                                         {256, 784, 256, 0.05},
                                         {33, 17, 130, 0.95},
                                         {12, 50, 16, 0.0},
                                         {1, 1, 7, 0.0}}) {
    SCOPED_TRACE(testing::Message() << c.rows << "x" << c.cols << " n=" << c.n << " density " << c.density);
    Tensor a = Tensor::zeros({c.rows, c.cols}, DType::f32);
    for (int64_t i = 0; i < a.numel(); ++i)
      if (rng.uniform(0, 1) < c.density)
        a.set_flat(i, rng.normal());
    const CsrMatrix csr = CsrMatrix::from_dense(a);
    const Tensor b = host_random({c.cols, c.n}, rng);
    Tensor want = Tensor::empty({c.rows, c.n}, DType::f32);
    SpmmArgs args;
    args.b = b.data<float>(), args.ldb = c.n, args.c = want.data<float>(), args.ldc = c.n, args.n = c.n;
    spmm_reference(csr, args);
    cuda::CusparseCsr dev(gpu(), csr);
    Tensor out = poisoned({c.rows, c.n});
    dev.spmm(up(b), out);
    gpu().synchronize();
    if (csr.nnz() == 0) {
      // The op writes the zeros itself (no cuSPARSE call): the NaN poison must be gone.
      const Tensor got = down(out);
      for (int64_t i = 0; i < got.numel(); ++i)
        ASSERT_EQ(got.at_flat(i), 0.0);
    } else {
      EXPECT_TRUE(close(down(out), want, 1e-5));
    }
  }
}

}  // namespace
}  // namespace lathe::gputest

#endif  // LATHE_HAVE_CUDA
