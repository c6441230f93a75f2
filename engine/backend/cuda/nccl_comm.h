// NcclComm: a minimal NCCL communicator for data-parallel training on GPUs (one rank per device):
// rank 0 makes a unique id, the ranks exchange it through the run's rendezvous store (as bytes),
// each constructs a communicator from it, then all-reduces and broadcasts device buffers in place
// on its stream (the backend's, so the collectives order with its kernels). Calls between
// group_start() and group_end() are launched as one (NCCL's grouping: one launch for many tensors).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <string>

#include "engine/core/dtype.h"

struct ncclComm;

namespace lathe::cuda {

/// The 128 opaque bytes of an ncclUniqueId, to pass between processes.
struct NcclUniqueId {
  std::array<char, 128> bytes{};

  std::string to_string() const { return std::string(bytes.data(), bytes.size()); }
  /// Throws lathe::Error unless `s` holds exactly 128 bytes.
  static NcclUniqueId from_string(const std::string& s);
};

/// Rank 0 calls this once and shares the result with every rank.
NcclUniqueId make_nccl_unique_id();

class NcclComm {
 public:
  /// Collective: every rank calls it with the same id and nranks (blocks until all have joined).
  /// `stream` is where the collectives run (the backend's, so they order with its kernels).
  NcclComm(const NcclUniqueId& id, int nranks, int rank, int device, cudaStream_t stream);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return m_rank; }
  int size() const { return m_size; }

  /// In-place sum over all ranks of n floats in device memory; enqueued on the stream.
  void all_reduce_sum(float* data, size_t n);
  enum class Op { sum, avg };
  /// In-place sum or mean over all ranks of n elements of `dtype` (f32, f64, f16, bf16, s32, s8, u8)
  /// in device memory; enqueued on the stream. Throws lathe::Error for another dtype.
  void all_reduce(void* data, size_t n, DType dtype, Op op);
  /// Rank `root`'s n elements into every rank's buffer, in place; enqueued on the stream.
  void broadcast(void* data, size_t n, DType dtype, int root);
  void group_start();
  void group_end();
  /// Waits for the collectives enqueued so far.
  void synchronize();

 private:
  ncclComm* m_comm = nullptr;
  int m_rank = 0, m_size = 1, m_device = 0;
  cudaStream_t m_stream = nullptr;
};

}  // namespace lathe::cuda
