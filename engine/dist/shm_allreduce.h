// ShmAllReduce: the sum of f32 buffers across ranks that share one machine, through a POSIX
// shared-memory segment instead of loopback TCP (Gloo has no shared-memory transport, and its tcp
// pairs cost two kernel copies and a syscall per message: on a 2-core machine the ranks' gradient
// all-reduce took as long as the mlp's step).
// Each call runs in chunks of at most `chunk_elements`; per chunk every rank copies its part into its
// slot and announces it (an atomic generation counter), then sums one 1/N share of the chunk over
// every slot in rank order into the result area, announces that, and copies the whole result back.
// Every element is summed once, by one rank, in rank order: all ranks get the same bits. A rank that
// does not arrive within the timeout, or whose process is gone, is named in a lathe::Error.
// Gradients may travel in 16 bits (fp16 or bf16, compute.grad_compression): each rank rounds its
// values into its slot, the owner of an element widens the ranks' 16-bit values, sums them in f32 in
// rank order, divides, and rounds the mean once to 16 bits into the result area; every rank widens
// those bits back. A slot holds twice as many 16-bit elements as f32 ones (the same bytes a chunk).
// The segment is created by rank 0 and opened by the others between two barriers of the caller
// (GlooCommunicator), after which rank 0 unlinks its name: it lives as long as a rank maps it, and
// nothing is left in /dev/shm, however the run ends.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace lathe::dist {

class ShmAllReduce {
 public:
  /// Rank 0 only: creates the segment `name` (a fresh one, replacing any stale one); throws
  /// lathe::Error when /dev/shm cannot hold it (the caller then keeps Gloo's tcp transport).
  static void create(const std::string& name, int world_size, int64_t chunk_elements);
  /// Every rank, after create() on rank 0: maps the segment.
  ShmAllReduce(const std::string& name, int rank, int world_size, int64_t chunk_elements,
               std::chrono::milliseconds timeout);
  ~ShmAllReduce();
  ShmAllReduce(const ShmAllReduce&) = delete;
  ShmAllReduce& operator=(const ShmAllReduce&) = delete;

  /// Rank 0, once every rank has mapped it: removes the name (the memory stays while mapped).
  static void unlink(const std::string& name);

  /// Replaces data[0..n) with its sum over the ranks (every rank calls it with the same n): the
  /// training loop's per-step votes and metric sums, kept off the tcp transport, whose every small
  /// message wakes a thread on each rank. Up to kSmallValues values take one synchronisation: each
  /// rank writes them into its place in one of two areas (by the generation's parity), announces
  /// them, waits for the others and sums every rank's values itself, in rank order (the same bits
  /// everywhere); more go in chunks (a share summed by each rank, then copied out).
  void all_reduce_sum(double* data, int64_t n);
  static constexpr int64_t kSmallValues = 32;
  /// Pieces of f32 memory taken as one array, in order.
  struct Span {
    float* data;
    int64_t n;
  };
  /// Every span from its owner (owners[i] for spans[i]) on every rank, bit for bit: per round the
  /// owners copy their pieces into the segment's data (the slots and the result area as one area of
  /// N + 1 chunks) and every rank copies the others' out (no arithmetic). ZeRO-1's all-gather.
  void gather(const std::vector<Span>& spans, const std::vector<int>& owners);
  /// gather() with every span owned by `root`.
  void broadcast(const std::vector<Span>& spans, int root);
  /// What travels through the slots and the result area for all_reduce_mean.
  enum class Format { f32, fp16, bf16 };
  /// Replaces the concatenation of `spans` with its sum over the ranks divided by `divisor`: the
  /// pieces go straight into this rank's slot and the result straight back (no staging bucket), and
  /// each element is divided once, by the rank that sums it, so every rank gets the same bits.
  /// fp16 / bf16: element i ends as widen(round16(sum over ranks k in order of
  /// widen(round16(x_k[i]))) / divisor)), the sum and the division in f32, round16 being
  /// f32_to_f16 / f32_to_bf16 of engine/core/dtype.h (nearest even; NaN stays NaN, fp16 beyond
  /// 65504 becomes inf); only 16-bit values pass through the segment.
  void all_reduce_mean(const std::vector<Span>& spans, float divisor, Format format = Format::f32);
  /// A run of `n` elements at `offset` in every rank's region of a segment all ranks map.
  struct Region {
    int64_t offset, n;
  };
  /// The f32 mean over the ranks of data that already lies in memory every rank maps (the gradient
  /// arena, ShmGradArena): rank k's copy of the regions starts at base + k * stride (base: this
  /// process's address of rank 0's). One synchronisation when every rank's data is there, one when
  /// the means are: in between each rank takes a 1/N share of the regions' elements, sums the N
  /// copies in rank order, divides once and writes the mean into every rank's copy. The same
  /// arithmetic as all_reduce_mean (the same bits), without its copies in and out and with two
  /// synchronisations per call instead of two per chunk.
  /// With `values` (n <= kSmallValues doubles), their sums over the ranks travel in the same first
  /// synchronisation, summed by every rank in rank order as all_reduce_sum does (the training loop's
  /// stop vote riding on the step's last gradient bucket).
  void all_reduce_mean_mapped(float* base, int64_t stride, const std::vector<Region>& regions, float divisor,
                              double* values = nullptr, int64_t n = 0);
  /// Elements of a chunk in `format` (f32: chunk_elements rounded up to even; 16 bits: twice that).
  int64_t chunk_elements(Format format) const { return format == Format::f32 ? m_chunk : 2 * m_chunk; }

  /// A value rank 0 writes into the segment for the others to check that they mapped the same
  /// memory (two containers on one machine may share a host name but not /dev/shm).
  void set_token(uint64_t token);
  uint64_t token() const;
  /// Once every rank has mapped the segment: from now on a peer whose process is gone is an error at
  /// once, not at the timeout (where every peer's pid can be seen from here).
  void watch_peers();

  /// Bytes of the segment for `world_size` ranks and chunks of `chunk_elements`.
  static int64_t segment_bytes(int world_size, int64_t chunk_elements);

 private:
  struct Header;
  /// Waits until every rank's counter (arrived or done) has reached m_generation.
  void wait_all(bool done, const char* what);
  /// One all-reduce of `total` elements of T in chunks (`what` a peer that does not come did not
  /// do, for the error: "bring its gradients"): fill(start, len, slot) copies this rank's
  /// [start, start + len) into its slot, combine(slots, cap, out, lo, hi) writes out[lo, hi) from
  /// the world's slots (slot k at slots + k * cap) for this rank's share of the chunk,
  /// drain(start, len, result) copies the result out.
  template <class T, class Fill, class Combine, class Drain>
  void reduce(int64_t total, const char* what, Fill fill, Combine combine, Drain drain);

  Header* m_header = nullptr;
  char* m_slots = nullptr;   ///< world_size slots of m_chunk f32 elements (or m_chunk / 2 doubles)
  char* m_result = nullptr;  ///< one slot's size
  void* m_map = nullptr;
  int64_t m_map_bytes = 0;
  int m_rank = 0, m_world = 1;
  int64_t m_chunk = 0;  ///< f32 elements per slot (even: a slot holds m_chunk / 2 doubles, aligned)
  uint64_t m_generation = 0;
  std::atomic<bool> m_busy{false};  ///< one call at a time per rank (the counters are shared)
  bool m_watch_pids = false;
  std::chrono::milliseconds m_timeout;
};

}  // namespace lathe::dist
