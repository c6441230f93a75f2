// NCCL through NcclComm (engine/backend/cuda/nccl_comm.h): the unique id's byte round trip (no device
// needed), then on a device a 1-rank communicator on the backend's stream and in-place all-reduces
// (the sum over one rank is the input itself, bit for bit), ordered with the backend's kernels.
// Label gpu: skipped with the reason without a device.
#ifdef LATHE_HAVE_CUDA
#include <cstring>

#include "engine/backend/cuda/nccl_comm.h"
#include "tests/gpu/gpu_test_support.h"

namespace lathe {
namespace {

using gputest::CudaTest;

TEST(NcclUniqueId, RoundTripsThroughBytesAndRejectsOtherSizes) {
  cuda::NcclUniqueId id;
  for (size_t i = 0; i < id.bytes.size(); ++i)
    id.bytes[i] = static_cast<char>(i * 7);
  const cuda::NcclUniqueId back = cuda::NcclUniqueId::from_string(id.to_string());
  EXPECT_EQ(std::memcmp(back.bytes.data(), id.bytes.data(), id.bytes.size()), 0);
  EXPECT_THROW(cuda::NcclUniqueId::from_string("short"), Error);
  EXPECT_THROW(cuda::NcclUniqueId::from_string(std::string(129, 'x')), Error);
}

class CudaNcclTest : public CudaTest {};

TEST_F(CudaNcclTest, OneRankCommunicatorAllReducesInPlace) {
  const cuda::NcclUniqueId id = cuda::make_nccl_unique_id();
  cuda::NcclComm comm(id, 1, 0, 0, gpu().stream());
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_THROW(cuda::NcclComm(id, 1, 1, 0, gpu().stream()), Error);  // rank out of range, before NCCL

  Rng rng(gputest::base_seed() + 500);
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{3} << 20}) {
    SCOPED_TRACE(n);
    const Tensor x = gputest::host_random({n}, rng);
    Tensor d = up(x);
    gpu().scale(d, 2.0);  // a kernel on the stream right before the collective
    comm.all_reduce_sum(static_cast<float*>(d.raw()), static_cast<size_t>(n));
    gpu().axpy(1.0, d, d);  // and one right after it: d = 2 * (2 x)
    comm.synchronize();
    const Tensor got = down(d);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i)
      wrong += got.data<float>()[i] != 4.0f * x.data<float>()[i];
    EXPECT_EQ(wrong, 0);
  }
  comm.all_reduce_sum(nullptr, 0);  // nothing to reduce: no call into NCCL
  EXPECT_NO_THROW(comm.synchronize());
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
