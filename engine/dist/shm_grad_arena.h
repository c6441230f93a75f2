// ShmGradArena: the gradients of CPU ranks that share a machine, placed in one POSIX shared-memory
// segment that every rank maps, so that the all-reduce (ShmAllReduce::all_reduce_mean_mapped) reads
// and writes them where the backward pass wrote them: no copy into a slot and back.
// Rank k's region holds its gradients at the same offsets as every other rank's (layout(): each
// gradient at a 64-byte-aligned offset, in the order given). Rank 0 creates the segment; the others
// map it between two collectives of the caller (GlooCommunicator), check a token rank 0 wrote, and
// rank 0 then unlinks the name: the memory lives as long as a rank maps it, nothing is left in
// /dev/shm. Tensors over a region (Tensor::over with owner()) keep the mapping alive.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lathe::dist {

class ShmGradArena {
 public:
  /// Where gradients of `sizes[i]` elements lie in a region (elements from its start, multiples of
  /// 16 floats), and the region's elements (a whole number of 4 KiB pages).
  struct Layout {
    std::vector<int64_t> offsets;
    int64_t region_elements = 0;
  };
  static Layout layout(const std::vector<int64_t>& sizes);

  /// Rank 0 only: creates the segment `name` (replacing a stale one) for `world_size` regions of
  /// `region_elements` floats, its pages reserved; lathe::Error when /dev/shm cannot hold it.
  static void create(const std::string& name, int world_size, int64_t region_elements);
  /// Rank 0, once every rank has mapped it: removes the name (the memory stays while mapped).
  static void unlink(const std::string& name);
  /// Every rank, after create() on rank 0: maps the segment (lathe::Error when it cannot).
  ShmGradArena(const std::string& name, int rank, int world_size, int64_t region_elements);

  /// A value rank 0 writes for the others to check that they mapped the same memory.
  void set_token(uint64_t token);
  uint64_t token() const;

  /// Rank 0's region in this process; rank k's is at base() + k * stride().
  float* base() const;
  int64_t stride() const { return m_region; }
  /// This rank's region.
  float* mine() const { return base() + m_rank * m_region; }
  /// The mapping, as the owner of tensors over it.
  std::shared_ptr<void> owner() const { return m_map; }

 private:
  struct Mapping;
  std::shared_ptr<Mapping> m_map;
  int m_rank = 0;
  int64_t m_region = 0;
};

}  // namespace lathe::dist
