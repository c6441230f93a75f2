// The device's caching allocator shared by two backends, each with its own stream (the bookkeeping
// alone is tested on the CPU in tests/backend/stream_block_pool_test.cpp): a block freed while one
// backend's kernels still read it must not be handed to the other backend's work before those
// kernels ran; a single backend reuses its own blocks at once. Label gpu: skipped without a device.
#ifdef LATHE_HAVE_CUDA
#include "engine/backend/cuda/cuda_allocator.h"
#include "tests/gpu/gpu_test_support.h"

namespace lathe {
namespace {

using gputest::CudaTest;

class CudaAllocatorTest : public CudaTest {
 protected:
  cuda::CudaAllocator& allocator() {
    cuda::CudaAllocator* a = cuda::CudaAllocator::for_device(0);
    EXPECT_NE(a, nullptr);
    return *a;
  }
};

TEST_F(CudaAllocatorTest, OneBackendReusesAFreedBlockAtOnce) {
  allocator().empty_cache();           // only this test's blocks in the cache
  const int64_t n = int64_t{1} << 22;  // 16 MiB
  Tensor t = gpu().zeros({n}, DType::f32);
  for (int i = 0; i < 20; ++i)
    gpu().scale(t, 1.5);  // pending work on the block
  const void* p = t.raw();
  const size_t reserved = allocator().reserved_bytes();
  t = Tensor();
  const Tensor u = gpu().empty({n}, DType::f32);
  EXPECT_EQ(u.raw(), p) << "the only stream's own pending work is ordered before anything it issues next";
  EXPECT_EQ(allocator().reserved_bytes(), reserved);
}

TEST_F(CudaAllocatorTest, TwoBackendsNeverShareABlockWhileItsKernelsArePending) {
  cuda::CudaBackend other(0);          // a second backend on the same device: its own stream
  const int64_t n = int64_t{1} << 24;  // 64 MiB
  Tensor ones = Tensor::empty({n}, DType::f32);
  ones.fill(1.0);
  const Tensor sevens = [&] {
    Tensor h = Tensor::empty({n}, DType::f32);
    h.fill(7.0);
    return h;
  }();
  for (int trial = 0; trial < 3; ++trial) {
    SCOPED_TRACE(trial);
    Tensor src = gpu().empty({n}, DType::f32);
    gpu().copy(ones, src);
    Tensor acc = gpu().zeros({n}, DType::f32);
    const int reps = 200;  // milliseconds of kernels reading `src`, queued ahead of the device
    for (int i = 0; i < reps; ++i)
      gpu().axpy(1.0, src, acc);
    const void* freed = src.raw();
    src = Tensor();  // freed while the axpys above still read it
    // The other backend takes a block of the same size and overwrites it on its own stream.
    Tensor mine = other.empty({n}, DType::f32);
    other.copy(sevens, mine);
    other.synchronize();
    gpu().synchronize();
    const Tensor got = down(acc);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i)
      wrong += got.data<float>()[i] != static_cast<float>(reps);
    EXPECT_EQ(wrong, 0) << "the other backend wrote into a block the first one's kernels were reading"
                        << (mine.raw() == freed ? " (same block)" : "");
  }
}

TEST_F(CudaAllocatorTest, ABlockWaitsForTheOtherStreamOnlyUntilItsWorkRan) {
  const int64_t n = int64_t{1} << 22;
  void* freed = nullptr;
  {
    cuda::CudaBackend other(0);
    allocator().empty_cache();
    Tensor t = gpu().zeros({n}, DType::f32);
    freed = t.raw();
    t = Tensor();
    gpu().synchronize();  // the work that touched it has run, and both streams are idle:
    other.synchronize();  // anyone may take it now
    const Tensor u = other.empty({n}, DType::f32);
    EXPECT_EQ(u.raw(), freed);
  }
  // The second backend is gone (its stream deregistered): unscoped allocations are for ours again.
  allocator().empty_cache();
  Tensor t = gpu().zeros({n}, DType::f32);
  gpu().scale(t, 2.0);
  freed = t.raw();
  t = Tensor();
  EXPECT_EQ(gpu().empty({n}, DType::f32).raw(), freed);
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
