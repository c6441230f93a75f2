// The communicator seam of the training loop (as llm.c's zero.cuh): the calls data-parallel
// training needs, made by train_phase and the evaluation at the right points today, so that a
// multi-process implementation (NCCL, MPI, ...) only adds a class. With one process every call is
// a no-op (LocalCommunicator), so results are those of the plain loop bit for bit.
//   broadcast_parameters  at the start of every training phase (every rank starts from rank 0's weights)
//   all_gather_parameters after a ZeRO-1 update, each rank's slices to every rank
//   all_reduce_gradients  after a step's micro-batches have completed its gradients, before the
//                         hooks that read them (loss-scaler check, pruning masks) and the update
//   all_reduce_sum        the evaluation's loss and correct-count sums (each rank scores its shard)
//   all_reduce_gradients_and_sum  the two in one where the communicator can: the step's gradients
//                         and its stop vote (a stop on any rank stops every rank after that step)
//   grad_ready_hook       before the backward pass of a one-micro-batch step: a hook that starts
//                         the gradient buckets during it (Gloo: a thread; NCCL: a communication stream)
//   barrier               for callers that need every rank at one point (none in the loop: only
//                         rank 0 writes files, and every rank holds the same weights)
//   attach                once, when the run has made its backend: a device communicator (NCCL)
//                         binds to that backend's device and stream there
// A device communicator wraps the host one (Gloo): host tensors and the evaluation's sums keep
// travelling on the host, device tensors on the device's own collectives. Accelerator libraries
// register theirs by backend name (register_device_communicator), as they register their backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/model.h"

namespace lathe {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Replaces every parameter's gradient with its mean over the ranks.
  virtual void all_reduce_gradients(const std::vector<NamedParam>& params) = 0;
  /// Copies rank `root`'s parameter values into every rank's parameters.
  virtual void broadcast_parameters(const std::vector<NamedParam>& params, int root) = 0;
  /// The all-gather of a sharded update (ZeRO-1): every rank's pieces[i] takes rank owners[i]'s
  /// values. By default one broadcast_parameters per owner, in rank order; a communicator may do it
  /// in one collective (GlooCommunicator through shared memory).
  virtual void all_gather_parameters(const std::vector<NamedParam>& pieces, const std::vector<int>& owners);
  /// Replaces values[0..n) with their sums over the ranks.
  virtual void all_reduce_sum(double* values, int64_t n) = 0;
  /// all_reduce_gradients(params), then values[0..n) replaced by their sums over the ranks; a
  /// communicator may do both in one synchronisation (GlooCommunicator through shared memory: the
  /// values ride on the last gradient bucket's), so that the training loop's per-step stop vote
  /// costs no wait of its own. By default the two calls.
  virtual void all_reduce_gradients_and_sum(const std::vector<NamedParam>& params, double* values, int64_t n) {
    all_reduce_gradients(params);
    all_reduce_sum(values, n);
  }
  /// Returns once every rank has called it.
  virtual void barrier() = 0;
  /// Gradient payload bytes this rank sent in the last all_reduce_gradients (0 = not counted).
  virtual int64_t bytes_last_step() const { return 0; }
  /// Overlap with the backward pass: the hook the loop passes to Model::set_grad_ready_hook for the
  /// backward pass whose gradients the next all_reduce_gradients(params) reduces (same `params`), so
  /// that buckets start as soon as their gradients are final; all_reduce_gradients then finishes
  /// the step. Empty (the default): everything happens in all_reduce_gradients. The loop asks for
  /// each step's last backward pass (with train.grad_accum > 1 the hook adds the earlier
  /// micro-batches' sum into each gradient before handing it on).
  virtual std::function<void(const Param*)> grad_ready_hook(const std::vector<NamedParam>& params) { return {}; }
  /// Seconds of gradient communication that a step's backward pass did not hide, measured where the
  /// collectives run when that is not the calling thread (a GPU's streams: all_reduce_gradients only
  /// enqueues, so the host's clock around it says nothing). It may be an earlier step's, read once
  /// the device has finished it, to avoid a synchronisation. Negative (the default): not measured
  /// there; the loop's clock around all_reduce_gradients is the time, as for host collectives.
  virtual double exposed_comm_seconds() { return -1; }
  /// Gradient bucket size in bytes (compute.bucket_mb) of a communicator that buckets; 0 = none.
  virtual int64_t bucket_bytes() const { return 0; }
  /// Collective: makes every rank's `bytes` rank `root`'s (a small message, e.g. an NCCL unique id).
  virtual void broadcast_bytes(std::string& bytes, int root) = 0;
  /// Collective, called once by the run after it has made `backend` (before any other call that
  /// moves tensors): the backend whose tensors the collectives will see. Host communicators need
  /// nothing from it.
  virtual void attach(Backend& backend) {}
};

/// One process: rank 0 of 1; every call leaves everything as it is.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_gradients(const std::vector<NamedParam>&) override {}
  void broadcast_parameters(const std::vector<NamedParam>&, int) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void barrier() override {}
  void broadcast_bytes(std::string&, int) override {}
};

/// Wraps a host communicator into the one ranks on `backend`'s devices use.
using DeviceCommunicatorFactory = std::function<std::shared_ptr<Communicator>(std::shared_ptr<Communicator> host)>;
/// Registers the device communicator of backend `backend` (lathe::cuda::register_nccl_communicator()
/// registers NCCL's for "cuda"). Thread-safe; call at start-up, beside register_backend.
void register_device_communicator(const std::string& backend, DeviceCommunicatorFactory factory);
/// The communicator ranks on `backend` train through: the registered device communicator around
/// `host`, or `host` itself for a backend without one (cpu, reference).
std::shared_ptr<Communicator> communicator_for_backend(const std::string& backend, std::shared_ptr<Communicator> host);

}  // namespace lathe
