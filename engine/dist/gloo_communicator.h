// GlooCommunicator: the training loop's Communicator (engine/exec/communicator.h) over Gloo's tcp
// transport for CPU ranks. Ranks meet through a rendezvous store (rendezvous.h); gradients travel in
// flat f32 buckets filled in reverse parameter order, as PyTorch DDP fills them (the last layers'
// gradients are ready first), each bucket all-reduced (sum) and divided by the world size.
// Host tensors only: a device tensor is a lathe::Error (NCCL is the GPU path).
// Speed features: buckets may travel as fp16/bf16 (half the bytes; over tcp partial sums in f32 on
// each hop, rounded to 16 bits for the next; through shared memory each rank's values rounded to 16
// bits, summed in f32 in rank order, divided and rounded once, ShmAllReduce::all_reduce_mean), and
// with overlap (grad_ready_hook) a communication thread all-reduces each bucket but the last as soon
// as the backward pass has produced all its gradients (the last, ready only when the backward pass
// ends, goes from all_reduce_gradients itself, with no hand-over to the thread and back).
// Ranks that share memory in f32: the plan moves the gradients into a shared-memory gradient arena
// (shm_grad_arena.h), where the backward pass writes them and every rank's owner of an element
// writes the mean into every rank's copy (ShmAllReduce::all_reduce_mean_mapped): no copies in and
// out, two synchronisations per bucket.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/exec/communicator.h"

namespace lathe::dist {

struct GlooOptions {
  /// A folder for Gloo's FileStore (one machine or a shared file system) or "redis://host:port".
  std::string rendezvous;
  /// Every key is under this prefix: two runs with different ids never meet in one store.
  std::string run_id = "lathe";
  /// The address the tcp transport binds to and announces (loopback: every rank on this machine).
  std::string host = "127.0.0.1";
  /// How long joining and every collective may wait for the other ranks.
  double timeout_s = 60;
  /// Gradient bucket size in MiB (PyTorch DDP's default, 25).
  double bucket_mb = 25;
  /// Wire format of the gradient buckets: f32, or 16 bits (half the bytes).
  enum class Compression { none, fp16, bf16 } compression = Compression::none;
  /// Ranks that share one machine sum gradient buckets (f32 or 16-bit) through shared memory
  /// (shm_allreduce.h) instead of loopback tcp; where any rank cannot map the segment, every rank
  /// keeps tcp.
  bool shared_memory = true;
};

class GlooCommunicator final : public Communicator {
 public:
  /// f32 elements per shared-memory chunk (256 KiB; twice as many 16-bit ones): a chunk, its peers'
  /// share and the result stay in the cores' L2 between the copy in, the sum and the copy out
  /// (bench/allreduce: a 2.1 MB mlp bucket took ~0.4 ms in 64 Ki chunks against ~0.9 ms in one 4 MiB
  /// chunk, p10 of 400, this machine).
  static constexpr int64_t kSharedMemoryChunk = int64_t{1} << 16;
  /// Joins the run: returns once all `world_size` ranks are connected, or throws lathe::Error naming
  /// the store and the ranks missing after `timeout_s` (ConfigError for bad options).
  GlooCommunicator(int rank, int world_size, const GlooOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return m_rank; }
  int world_size() const override { return m_world_size; }
  void all_reduce_gradients(const std::vector<NamedParam>& params) override;
  void broadcast_parameters(const std::vector<NamedParam>& params, int root) override;
  /// Ranks sharing memory: one shared-memory gather for every piece (each owner copies its pieces
  /// in, every other rank copies them out), so a ZeRO-1 step's all-gather is one pass, not N.
  void all_gather_parameters(const std::vector<NamedParam>& pieces, const std::vector<int>& owners) override;
  void all_reduce_sum(double* values, int64_t n) override;
  /// Through the gradient arena the values ride on the step's last bucket (one synchronisation for
  /// both, ShmAllReduce::all_reduce_mean_mapped); on any other path they follow in all_reduce_sum.
  void all_reduce_gradients_and_sum(const std::vector<NamedParam>& params, double* values, int64_t n) override;
  void barrier() override;
  /// Through the rendezvous store: the root sets a key, the others wait for it (compute.timeout_s).
  void broadcast_bytes(std::string& bytes, int root) override;
  /// Gradient payload bytes the last all_reduce_gradients sent (elements x 4, or x 2 compressed).
  int64_t bytes_last_step() const override { return m_bytes_last_step; }

  /// Overlap (Communicator::grad_ready_hook): each bucket's all-reduce starts on a communication
  /// thread once every gradient in it is ready (buckets in order, the same on every rank);
  /// all_reduce_gradients waits for them (and sends the rest). The averages are bit-identical to the
  /// blocking path. A call with other params rebuilds the plan. One rank: empty (nothing to send).
  /// Through shared memory in f32 a new plan is collective (every rank plans the same parameters
  /// at the same step, as the training loop does) and replaces each Param::grad by a tensor of the
  /// same layout and values in the gradient arena; a gradient replaced afterwards is copied to its
  /// place in the arena and back at each reduction.
  std::function<void(const Param*)> grad_ready_hook(const std::vector<NamedParam>& params) override;
  /// bucket_mb MiB (what the NCCL communicator wrapping this one cuts its buckets by).
  int64_t bucket_bytes() const override { return m_bucket_elements * static_cast<int64_t>(sizeof(float)); }
  /// Buckets the last all_reduce_gradients had already started (or finished) before it was called.
  int last_buckets_started_early() const { return m_started_early; }
  /// "file store /tmp/x" or "redis store host:port", as errors name it.
  const std::string& store_description() const;
  /// Elements of one gradient bucket (bucket_mb MiB of f32, at least 1).
  int64_t bucket_elements() const { return m_bucket_elements; }
  /// Number of bucket all-reduces the last all_reduce_gradients made.
  int last_bucket_count() const { return m_last_buckets; }
  /// Whether the gradient buckets go through shared memory (every rank on this machine).
  bool uses_shared_memory() const;
  /// Whether the planned gradients live in the shared-memory gradient arena (shm_grad_arena.h).
  bool uses_gradient_arena() const;
  /// The largest gradient arena (all ranks' regions together) the plan puts the gradients in; a
  /// larger model's gradients go through the slots in chunks.
  static constexpr double kGradArenaMaxBytes = 1024.0 * 1024 * 1024;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
  int m_rank = 0;
  int m_world_size = 1;
  int64_t m_bucket_elements = 1;
  int m_last_buckets = 0;
  int m_started_early = 0;
  int64_t m_bytes_last_step = 0;
  std::vector<float> m_bucket;
  std::vector<uint16_t> m_bucket16;
  GlooOptions::Compression m_compression = GlooOptions::Compression::none;
  std::function<void(const Param*)> make_ready_hook();
  /// Sums `filled` elements of a bucket over Gloo's tcp transport, in place, in the wire format (the
  /// shared-memory path reduces the gradients where they are, ShmAllReduce::all_reduce_mean, in the
  /// same 16 bits when compressed).
  void reduce_bucket(float* data, uint16_t* wire, int64_t filled);
  /// Collective, at the end of the constructor: the shared-memory path when every rank can map it.
  void open_shared_memory(const std::string& run_id);
  /// Collective, when grad_ready_hook plans gradients of `sizes` (stream order) with shared memory in
  /// f32: maps a gradient arena for them on every rank, or none (false) where any rank cannot.
  bool open_grad_arena(const std::vector<int64_t>& sizes);
  /// all_reduce_sum() over Gloo's tcp whatever the shared memory: what open_shared_memory uses
  /// before every rank is known to have mapped the segment.
  void tcp_all_reduce_sum(double* values, int64_t n);
};

}  // namespace lathe::dist
