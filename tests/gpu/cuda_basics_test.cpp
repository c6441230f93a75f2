// CUDA backend basics: error macros and device probing (these run on any machine), then on a
// device: registration, allocator accounting, copies across layouts and directions, dtype reorder
// bit-exact with the host conversions, fill, argument checks (no hidden host copies), supports().
// In a CPU-only build (the CUDA backend not linked) this folder still builds: one test says why
// there is nothing to run.
#ifdef LATHE_HAVE_CUDA
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>

#include <cstring>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "tests/gpu/gpu_test_support.h"

namespace lathe {
namespace {

using gputest::CudaTest;

// ---------------------------------------------------------------- no device needed
TEST(CudaCheck, MacrosThrowWithStatementAndLibraryMessage) {
  try {
    LATHE_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cudaErrorInvalidValue"), std::string::npos) << m;
    EXPECT_NE(m.find("cuda_basics_test.cpp"), std::string::npos) << m;
  }
  try {
    LATHE_CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED);
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cuBLAS"), std::string::npos) << m;
    EXPECT_NE(m.find("CUBLAS_STATUS_NOT_INITIALIZED"), std::string::npos) << m;
  }
  try {
    LATHE_CUDNN_CHECK(CUDNN_STATUS_BAD_PARAM);
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cuDNN"), std::string::npos) << m;
    EXPECT_NE(m.find("BAD_PARAM"), std::string::npos) << m;
  }
  EXPECT_THROW(LATHE_NCCL_CHECK(ncclInvalidArgument), Error);
  EXPECT_NO_THROW(LATHE_CUDA_CHECK(cudaSuccess));
  EXPECT_NO_THROW(LATHE_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
  EXPECT_NO_THROW(LATHE_CUDNN_CHECK(CUDNN_STATUS_SUCCESS));
  EXPECT_NO_THROW(LATHE_NCCL_CHECK(ncclSuccess));
}

TEST(CudaProbe, DeviceCountIsConsistentAndNeverThrows) {
  const int n = cuda::device_count();
  EXPECT_GE(n, 0);
  EXPECT_EQ(n, cuda_device_count());  // registered by test_main
  if (n == 0) {
    EXPECT_FALSE(cuda::device_unavailable_reason().empty());
    EXPECT_THROW(make_backend("cuda"), ConfigError);
    EXPECT_EQ(make_backend("auto")->name(), "cpu");
  } else {
    EXPECT_TRUE(cuda::device_unavailable_reason().empty());
    EXPECT_EQ(make_backend("cuda")->name(), "cuda");
  }
}

TEST(CudaSupports, MixedPrecisionFollowsComputeCapability) {
  using cuda::CudaBackend;
  for (Op op : {Op::conv2d, Op::linear}) {
    EXPECT_TRUE(CudaBackend::supports_on(op, DType::f32, 60));
    EXPECT_FALSE(CudaBackend::supports_on(op, DType::f16, 61));
    EXPECT_TRUE(CudaBackend::supports_on(op, DType::f16, 70));
    EXPECT_FALSE(CudaBackend::supports_on(op, DType::bf16, 75));
    EXPECT_TRUE(CudaBackend::supports_on(op, DType::bf16, 80));
    EXPECT_TRUE(CudaBackend::supports_on(op, DType::bf16, 90));  // H100/H200
  }
  EXPECT_FALSE(CudaBackend::supports_on(Op::relu, DType::bf16, 90));
  EXPECT_TRUE(CudaBackend::supports_on(Op::reorder, DType::bf16, 60));
  EXPECT_FALSE(CudaBackend::supports_on(Op::reorder, DType::s8, 90));
}

// ---------------------------------------------------------------- on a device
TEST_F(CudaTest, DescribesItself) {
  EXPECT_EQ(gpu().name(), "cuda");
  EXPECT_EQ(gpu().device(), Device::cuda(0));
  EXPECT_FALSE(gpu().device_name().empty());
  EXPECT_TRUE(gpu().supports(Op::conv2d, DType::f32));
  EXPECT_TRUE(gpu().supports(Op::softmax_cross_entropy, DType::f32));
  // bf16 (and f16) convolutions and matmuls run on tensor cores from sm_80 (sm_70): an H200 has both.
  const int cc = gpu().compute_capability();
  EXPECT_GE(cc, 30);
  EXPECT_EQ(gpu().supports(Op::conv2d, DType::bf16), cc >= 80);
  EXPECT_EQ(gpu().supports(Op::linear, DType::bf16), cc >= 80);
  EXPECT_EQ(gpu().supports(Op::conv2d, DType::f16), cc >= 70);
  EXPECT_FALSE(gpu().supports(Op::relu, DType::bf16));
  EXPECT_TRUE(gpu().supports(Op::reorder, DType::bf16));
  EXPECT_EQ(make_backend("auto")->name(), "cuda");
}

TEST_F(CudaTest, AllocatorCountsLiveAndPeakBytes) {
  Allocator& a = allocator_for(Device::cuda(0));
  const size_t before = a.live_bytes();
  {
    Tensor t = gpu().empty({1000, 3}, DType::f32);
    EXPECT_EQ(a.live_bytes(), before + 12000);
    EXPECT_GE(a.peak_bytes(), before + 12000);
  }
  EXPECT_EQ(a.live_bytes(), before);
  // A cached block is reused for the same size, and still counted once.
  Tensor u = gpu().empty({1000, 3}, DType::f32);
  EXPECT_EQ(a.live_bytes(), before + 12000);
}

TEST_F(CudaTest, CopyRoundTripsEveryLayoutAndDirection) {
  Rng rng(gputest::base_seed());
  const Shape shape{3, 5, 7, 2};
  const Tensor host = gputest::host_random(shape, rng);
  for (MemoryFormat hf : {MemoryFormat::contiguous, MemoryFormat::channels_last})
    for (MemoryFormat d1 : {MemoryFormat::contiguous, MemoryFormat::channels_last})
      for (MemoryFormat d2 : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
        SCOPED_TRACE(std::string(gputest::format_name(hf)) + " -> " + gputest::format_name(d1) + " -> " +
                     gputest::format_name(d2));
        Tensor h = Tensor::empty(shape, DType::f32, Device::cpu(), hf);
        host.copy_to(h);
        Tensor a = gpu().empty(shape, DType::f32, d1);
        gpu().copy(h, a);
        Tensor b = poisoned(shape, d2);
        gpu().copy(a, b);
        Tensor back = Tensor::empty(shape, DType::f32, Device::cpu(), hf);
        gpu().copy(b, back);
        const Tensor c = back.contiguous_copy();
        EXPECT_EQ(std::memcmp(c.raw(), host.raw(), host.nbytes()), 0);
      }
}

TEST_F(CudaTest, FillZeroWritesEveryElement) {
  Tensor t = poisoned({4, 3, 5, 5}, MemoryFormat::channels_last);
  gpu().fill_zero(t);
  const Tensor h = down(t);
  for (int64_t i = 0; i < h.numel(); ++i)
    ASSERT_EQ(h.at_flat(i), 0.0) << i;
  Tensor z = gpu().zeros({7}, DType::f32);
  EXPECT_EQ(gputest::max_abs(down(z)), 0.0);
}

TEST_F(CudaTest, ReorderMatchesHostConversionsBitForBit) {
  Rng rng(gputest::base_seed() + 1);
  const Shape shape{2, 3, 5, 7};
  Tensor host = gputest::host_random(shape, rng, MemoryFormat::contiguous, 100.0);
  host.set_flat(0, std::numeric_limits<double>::infinity());
  host.set_flat(1, 1e-40);    // subnormal in f32
  host.set_flat(2, 65520.0);  // rounds to inf in f16
  const Tensor src = up(host, MemoryFormat::channels_last);
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor low = gpu().empty(shape, dt);
    gpu().reorder(src, low);  // f32 nhwc -> 16-bit nchw on the device
    const Tensor got = down(low);
    const uint16_t* bits = static_cast<const uint16_t*>(got.raw());
    for (int64_t i = 0; i < host.numel(); ++i) {
      const float f = host.data<float>()[i];
      const uint16_t want = dt == DType::bf16 ? f32_to_bf16(f) : f32_to_f16(f);
      ASSERT_EQ(bits[i], want) << "element " << i << " value " << f;
    }
    // And back to f32 on a host destination (staged through the device).
    Tensor wide = Tensor::empty(shape, DType::f32, Device::cpu(), MemoryFormat::channels_last);
    gpu().reorder(low, wide);
    for (int64_t i = 0; i < host.numel(); ++i) {
      const double want = dt == DType::bf16 ? bf16_to_f32(bits[i]) : f16_to_f32(bits[i]);
      ASSERT_EQ(wide.at_flat(i), want) << i;
    }
  }
  Tensor s8 = gpu().empty(shape, DType::s8);
  EXPECT_THROW(gpu().reorder(src, s8), Error);
}

TEST_F(CudaTest, RejectsHostTensorsInsteadOfCopyingThem) {
  Tensor h = Tensor::zeros({4, 4}, DType::f32);
  Tensor d = gpu().zeros({4, 4}, DType::f32);
  EXPECT_THROW(gpu().relu_forward(h, d), Error);
  EXPECT_THROW(gpu().linear_forward(d, h, nullptr, d), Error);
  EXPECT_THROW(gpu().sum(h), Error);
  Tensor wrong = gpu().zeros({4, 5}, DType::f32);
  EXPECT_THROW(gpu().add(d, wrong, d), Error);
}

TEST_F(CudaTest, ConvolutionAlgorithmIsChosenOncePerShape) {
  Rng rng(gputest::base_seed() + 2);
  const ConvParams p{1, 1, 1, 1};
  Tensor x = up(gputest::host_random({2, 3, 9, 9}, rng)), w = up(gputest::host_random({4, 3, 3, 3}, rng));
  Tensor y = gpu().empty({2, 4, 9, 9}, DType::f32);
  auto& cache = gpu().context().conv_algo_cache();
  const size_t before = cache.size();
  gpu().conv2d_forward(p, x, w, nullptr, y);
  gpu().conv2d_forward(p, x, w, nullptr, y);
  EXPECT_EQ(cache.size(), before + 1);
}

}  // namespace
}  // namespace lathe

#else  // no CUDA backend in this build

#include <gtest/gtest.h>

TEST(CudaBackend, NotBuilt) {
  GTEST_SKIP() << "no CUDA device: this build has no CUDA backend (configure with -DLATHE_CUDA=ON where the CUDA "
                  "toolkit is installed)";
}

#endif  // LATHE_HAVE_CUDA
