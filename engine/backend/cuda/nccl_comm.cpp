// NCCL communicator wrapper (see nccl_comm.h).
#include "engine/backend/cuda/nccl_comm.h"

#include <nccl.h>

#include <cstring>

#include "engine/backend/cuda/cuda_check.h"

namespace lathe::cuda {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId::bytes), "ncclUniqueId size changed");

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

void NcclComm::synchronize() {
  LATHE_CUDA_CHECK(cudaStreamSynchronize(m_stream));
  ncclResult_t async_err = ncclSuccess;
  LATHE_NCCL_CHECK(ncclCommGetAsyncError(m_comm, &async_err));
  LATHE_NCCL_CHECK(async_err);
}

}  // namespace lathe::cuda
