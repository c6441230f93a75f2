// The gradient bucket cut (see grad_buckets.h).
#include "engine/dist/grad_buckets.h"

#include <algorithm>
#include <string>

#include "engine/core/error.h"

namespace lathe::dist {

BucketPlan plan_grad_buckets(const std::vector<int64_t>& sizes, int64_t cap) {
  if (cap < 1)
    throw Error("gradient buckets: the bucket size is " + std::to_string(cap) + " elements; it must be >= 1");
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] < 0)
      throw Error("gradient buckets: gradient " + std::to_string(i) + " has " + std::to_string(sizes[i]) + " elements");
  BucketPlan plan;
  plan.buckets_of.resize(sizes.size());
  size_t gi = 0;
  int64_t offset = 0;  // into sizes[gi]
  while (gi < sizes.size()) {
    const int b = static_cast<int>(plan.buckets.size());
    GradBucket bucket;
    while (gi < sizes.size() && bucket.elements < cap) {
      const int64_t n = std::min(sizes[gi] - offset, cap - bucket.elements);
      bucket.pieces.push_back({gi, offset, n});
      std::vector<int>& list = plan.buckets_of[gi];
      if (list.empty() || list.back() != b) {
        list.push_back(b);
        ++bucket.gradients;
      }
      bucket.elements += n;
      offset += n;
      if (offset == sizes[gi])
        ++gi, offset = 0;
    }
    plan.buckets.push_back(std::move(bucket));
  }
  return plan;
}

}  // namespace lathe::dist
