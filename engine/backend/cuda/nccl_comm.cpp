// NCCL communicator wrapper (see nccl_comm.h).
#include "engine/backend/cuda/nccl_comm.h"

#include <nccl.h>

#include <cstring>

#include "engine/backend/cuda/cuda_check.h"

namespace lathe::cuda {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId::bytes), "ncclUniqueId size changed");

namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::s32:
      return ncclInt32;
    case DType::s8:
      return ncclInt8;
    case DType::u8:
      return ncclUint8;
  }
  throw Error("NCCL: no NCCL type for dtype " + std::string(dtype_name(dtype)));
}

}  // namespace

NcclUniqueId NcclUniqueId::from_string(const std::string& s) {
  NcclUniqueId id;
  LATHE_CHECK(s.size() == id.bytes.size(), "NCCL unique id must be ", id.bytes.size(), " bytes, got ", s.size());
  std::memcpy(id.bytes.data(), s.data(), s.size());
  return id;
}

NcclUniqueId make_nccl_unique_id() {
  ncclUniqueId raw;
  LATHE_NCCL_CHECK(ncclGetUniqueId(&raw));
  NcclUniqueId id;
  std::memcpy(id.bytes.data(), &raw, sizeof(raw));
  return id;
}

NcclComm::NcclComm(const NcclUniqueId& id, int nranks, int rank, int device, cudaStream_t stream)
    : m_rank(rank), m_size(nranks), m_device(device), m_stream(stream) {
  LATHE_CHECK(nranks >= 1 && rank >= 0 && rank < nranks, "NCCL: rank ", rank, " of ", nranks, " is out of range");
  ncclUniqueId raw;
  std::memcpy(&raw, id.bytes.data(), sizeof(raw));
  LATHE_CUDA_CHECK(cudaSetDevice(device));
  LATHE_NCCL_CHECK(ncclCommInitRank(&m_comm, nranks, raw, rank));
}

NcclComm::~NcclComm() {
  if (!m_comm)
    return;
  (void)cudaSetDevice(m_device);
  (void)cudaStreamSynchronize(m_stream);
  (void)ncclCommDestroy(m_comm);
}

void NcclComm::all_reduce_sum(float* data, size_t n) {
  if (n == 0)
    return;
  LATHE_NCCL_CHECK(ncclAllReduce(data, data, n, ncclFloat32, ncclSum, m_comm, m_stream));
}

void NcclComm::all_reduce(void* data, size_t n, DType dtype, Op op, cudaStream_t stream) {
  if (n == 0)
    return;
  const ncclDataType_t type = nccl_type(dtype);
  LATHE_NCCL_CHECK(ncclAllReduce(data, data, n, type, op == Op::avg ? ncclAvg : ncclSum, m_comm, stream));
}

void NcclComm::broadcast(void* data, size_t n, DType dtype, int root) {
  LATHE_CHECK(root >= 0 && root < m_size, "NCCL: broadcast root ", root, " is not a rank of ", m_size);
  if (n == 0)
    return;
  LATHE_NCCL_CHECK(ncclBroadcast(data, data, n, nccl_type(dtype), root, m_comm, m_stream));
}

void NcclComm::group_start() { LATHE_NCCL_CHECK(ncclGroupStart()); }
void NcclComm::group_end() { LATHE_NCCL_CHECK(ncclGroupEnd()); }

void NcclComm::grouped(const std::function<void()>& calls) {
  group_start();
  try {
    calls();
  } catch (...) {
    (void)ncclGroupEnd();  // the first error is the one to report
    throw;
  }
  group_end();
}

void NcclComm::synchronize() {
  LATHE_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  ncclResult_t async_err = ncclSuccess;
  LATHE_NCCL_CHECK(ncclCommGetAsyncError(m_comm, &async_err));
  LATHE_NCCL_CHECK(async_err);
}

}  // namespace lathe::cuda
