// NcclComm: a minimal NCCL communicator for data-parallel training on GPUs (one rank per device):
// rank 0 makes a unique id, the ranks exchange it through the run's rendezvous store (as bytes),
// each constructs a communicator from it, then all-reduces and broadcasts device buffers in place
// on its stream (the backend's, so the collectives order with its kernels), or on a stream the
// caller names (a communication stream, for all-reduces that overlap the backward pass). Calls
// between group_start() and group_end(), or inside grouped(), are launched as one (NCCL's grouping:
// one launch for many tensors).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <functional>
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
  void all_reduce(void* data, size_t n, DType dtype, Op op) { all_reduce(data, n, dtype, op, m_stream); }
  /// The same, enqueued on `stream` (a stream of this communicator's device).
  void all_reduce(void* data, size_t n, DType dtype, Op op, cudaStream_t stream);
  /// Rank `root`'s n elements into every rank's buffer, in place; enqueued on the stream.
  void broadcast(void* data, size_t n, DType dtype, int root);
  void group_start();
  void group_end();
  /// Runs `calls` inside one NCCL group. If they throw, the group is still closed (its own result
  /// ignored) before the exception goes on, so no error leaves a group open on this thread.
  void grouped(const std::function<void()>& calls);
  /// The stream the collectives without a stream argument run on.
  cudaStream_t stream() const { return m_stream; }
  /// Waits for the collectives enqueued so far.
  void synchronize();

 private:
  ncclComm* m_comm = nullptr;
  int m_rank = 0, m_size = 1, m_device = 0;
  cudaStream_t m_stream = nullptr;
};

}  // namespace lathe::cuda
