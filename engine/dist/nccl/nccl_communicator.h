// NcclCommunicator: the training loop's Communicator for GPU ranks (one GPU each). It wraps the
// host communicator the ranks joined with (Gloo, through the run's rendezvous store) and adds an
// NCCL communicator on the run's CUDA device:
//   - attach(): a barrier on the host (every rank alive), then rank 0's NCCL unique id travels to
//     the others through the store (Communicator::broadcast_bytes), and each rank joins NCCL; a
//     communication stream (non-blocking) and two events are made on the run's device.
//   - device tensors (gradients, parameters) move through NCCL, gradients averaged with ncclAvg;
//     host tensors (the ZeRO-1 checkpoint gather's staging copies) and the evaluation's sums go
//     through the host communicator.
//   - blocking path (no hook this step): every gradient in one NCCL group on the backend's stream.
//   - overlap (grad_ready_hook): the device gradients, last parameter first, cut into buckets of
//     bucket_bytes (dist/grad_buckets.h, the cut Gloo uses). When the backward pass has enqueued the
//     last gradient of a bucket, the hook records an event on the compute stream, makes the
//     communication stream wait for it and enqueues the bucket's all-reduces there (one group);
//     all_reduce_gradients enqueues the rest the same way, then makes the compute stream wait for
//     the communication stream (no host synchronisation). Buckets are issued in plan order, the
//     same on every rank, as NCCL requires.
//   - dist/comm_s (exposed_comm_seconds): two timing events on the compute stream around that work,
//     read one step later, when the device has long finished them.
// Built with the CUDA backend only (lathe_cuda); register_nccl_communicator() makes
// communicator_for_backend("cuda", host) return one.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "engine/exec/communicator.h"

namespace lathe::cuda {

class NcclComm;

class NcclCommunicator final : public Communicator {
 public:
  /// `bucket_bytes`: the overlap's bucket size; 0 takes the host communicator's (compute.bucket_mb),
  /// or 25 MiB (PyTorch DDP's) when it has none.
  explicit NcclCommunicator(std::shared_ptr<Communicator> host, int64_t bucket_bytes = 0);
  ~NcclCommunicator() override;

  int rank() const override { return m_host->rank(); }
  int world_size() const override { return m_host->world_size(); }
  /// Throws lathe::Error unless `backend` is a CUDA backend; collective (joins NCCL).
  void attach(Backend& backend) override;
  void all_reduce_gradients(const std::vector<NamedParam>& params) override;
  /// Also with one rank (NCCL's mean over one rank is the gradient bit for bit), so that a 1-GPU
  /// machine runs the overlap path. Host gradients get the host communicator's hook. Throws before
  /// attach(). A call while a step's buckets are still in flight (its all_reduce_gradients never
  /// came: an error in the backward pass) first makes the compute stream wait for them.
  std::function<void(const Param*)> grad_ready_hook(const std::vector<NamedParam>& params) override;
  void broadcast_parameters(const std::vector<NamedParam>& params, int root) override;
  void all_reduce_sum(double* values, int64_t n) override { m_host->all_reduce_sum(values, n); }
  void barrier() override { m_host->barrier(); }
  void broadcast_bytes(std::string& bytes, int root) override { m_host->broadcast_bytes(bytes, root); }
  int64_t bytes_last_step() const override { return m_bytes_last_step; }
  /// The previous step's exposed communication, timed on the device by two events on the compute
  /// stream around all_reduce_gradients' work (after the backward pass, after the collectives or the
  /// wait for them); -1 until a step has been timed (the loop then takes its own clock).
  double exposed_comm_seconds() override;
  int64_t bucket_bytes() const override { return m_bucket_bytes; }
  /// The device attach() bound to (-1 before).
  int device() const { return m_device; }
  /// Device buckets the last all_reduce_gradients reduced (0 on the blocking path).
  int last_bucket_count() const { return m_last_buckets; }
  /// Of those, the buckets the hook had already enqueued during the backward pass.
  int last_buckets_started_early() const { return m_started_early; }
  /// Tests: called after each bucket's all-reduces are enqueued on the communication stream, with
  /// that stream and the bucket's device spans (pointer, bytes), so a test can enqueue a copy there.
  using BucketObserver = std::function<void(cudaStream_t, const std::vector<std::pair<void*, size_t>>&)>;
  void set_bucket_observer(BucketObserver observer) { m_observer = std::move(observer); }

 private:
  struct Overlap;
  std::shared_ptr<Communicator> m_host;
  std::unique_ptr<NcclComm> m_nccl;
  std::unique_ptr<Overlap> m_overlap;
  int m_device = -1;
  int64_t m_bucket_bytes = 0;
  int64_t m_bytes_last_step = 0;
  int m_last_buckets = 0;
  int m_started_early = 0;
  BucketObserver m_observer;
  /// The NCCL communicator, or a lathe::Error saying attach() has not run.
  NcclComm& nccl(const char* call);
  /// Marks `p`'s gradient final and enqueues the buckets that became complete (the hook's body).
  void grad_ready(const Param* p);
  /// all_reduce_gradients' work, between the two timing events.
  void reduce_gradients(const std::vector<NamedParam>& params);
  /// Enqueues buckets [next, end) on the communication stream after the compute stream's work so far.
  void issue_buckets(size_t end);
  /// Makes the compute stream wait for everything enqueued on the communication stream.
  void join_streams();
};

/// Registers NcclCommunicator as the device communicator of the "cuda" backend (idempotent).
void register_nccl_communicator();

}  // namespace lathe::cuda
