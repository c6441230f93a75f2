// Gradient buckets: the cut of a step's gradients into the all-reduce buckets, shared by the Gloo
// (CPU) and NCCL (GPU) communicators. The gradients are listed last parameter first, as the
// backward pass produces them (PyTorch DDP's reverse order), and read as one stream of elements cut
// every `cap` elements: a bucket may hold several gradients, or part of one. Host-only bookkeeping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lathe::dist {

/// A run of `count` elements of gradient `grad` (an index into the planned list) from `offset`.
struct BucketPiece {
  size_t grad;
  int64_t offset, count;
  bool operator==(const BucketPiece& o) const { return grad == o.grad && offset == o.offset && count == o.count; }
};

struct GradBucket {
  std::vector<BucketPiece> pieces;
  int64_t elements = 0;  ///< sum of the pieces' counts (at most the cap)
  int gradients = 0;     ///< distinct gradients with a piece in it: the readiness count of overlap
};

struct BucketPlan {
  std::vector<GradBucket> buckets;           ///< in the order every rank reduces them
  std::vector<std::vector<int>> buckets_of;  ///< per gradient: the buckets holding part of it, ascending
};

/// Cuts gradients of `sizes[i]` elements (in the order given) into buckets of at most `cap`
/// elements (cap >= 1, else lathe::Error naming it). A gradient of 0 elements gets a 0-count piece
/// in the bucket being filled, so every gradient belongs to one bucket at least.
BucketPlan plan_grad_buckets(const std::vector<int64_t>& sizes, int64_t cap);

}  // namespace lathe::dist
