// NcclCommunicator: the training loop's Communicator for GPU ranks (one GPU each). It wraps the
// host communicator the ranks joined with (Gloo, through the run's rendezvous store) and adds an
// NCCL communicator on the run's CUDA device and stream:
//   - attach(): a barrier on the host (every rank alive), then rank 0's NCCL unique id travels to
//     the others through the store (Communicator::broadcast_bytes), and each rank joins NCCL.
//   - device tensors (gradients, parameters) move through NCCL on the backend's stream, one NCCL
//     group per call (gradients averaged with ncclAvg); host tensors (the ZeRO-1 checkpoint gather's
//     staging copies) and the evaluation's sums go through the host communicator.
// Built with the CUDA backend only (lathe_cuda); register_nccl_communicator() makes
// communicator_for_backend("cuda", host) return one.
#pragma once

#include <memory>

#include "engine/exec/communicator.h"

namespace lathe::cuda {

class NcclComm;

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(std::shared_ptr<Communicator> host);
  ~NcclCommunicator() override;

  int rank() const override { return m_host->rank(); }
  int world_size() const override { return m_host->world_size(); }
  /// Throws lathe::Error unless `backend` is a CUDA backend; collective (joins NCCL).
  void attach(Backend& backend) override;
  void all_reduce_gradients(const std::vector<NamedParam>& params) override;
  void broadcast_parameters(const std::vector<NamedParam>& params, int root) override;
  void all_reduce_sum(double* values, int64_t n) override { m_host->all_reduce_sum(values, n); }
  void barrier() override { m_host->barrier(); }
  void broadcast_bytes(std::string& bytes, int root) override { m_host->broadcast_bytes(bytes, root); }
  int64_t bytes_last_step() const override { return m_bytes_last_step; }
  /// The device attach() bound to (-1 before).
  int device() const { return m_device; }

 private:
  std::shared_ptr<Communicator> m_host;
  std::unique_ptr<NcclComm> m_nccl;
  int m_device = -1;
  int64_t m_bytes_last_step = 0;
  /// The NCCL communicator, or a lathe::Error saying attach() has not run.
  NcclComm& nccl(const char* call);
};

/// Registers NcclCommunicator as the device communicator of the "cuda" backend (idempotent).
void register_nccl_communicator();

}  // namespace lathe::cuda
