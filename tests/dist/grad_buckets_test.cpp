// The gradient bucket cut (engine/dist/grad_buckets.h) that Gloo and NCCL share: a case worked out
// by hand (a gradient split over two buckets, a bucket of several gradients, a 0-element gradient),
// the invariants on random sizes (every element in exactly one piece, in stream order; every bucket
// full but the last; readiness counts and bucket lists agree with the pieces), and bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/dist/grad_buckets.h"

namespace lathe::dist {
namespace {

TEST(GradBuckets, CutsTheReverseOrderStreamEveryCapElements) {
  // Stream 5 | 3 | 0 | 7 cut every 4: [g0 0..4) [g0 4..5, g1 0..3) [g2 -, g3 0..4) [g3 4..7).
  const BucketPlan plan = plan_grad_buckets({5, 3, 0, 7}, 4);
  ASSERT_EQ(plan.buckets.size(), 4u);
  EXPECT_EQ(plan.buckets[0].pieces, (std::vector<BucketPiece>{{0, 0, 4}}));
  EXPECT_EQ(plan.buckets[1].pieces, (std::vector<BucketPiece>{{0, 4, 1}, {1, 0, 3}}));
  EXPECT_EQ(plan.buckets[2].pieces, (std::vector<BucketPiece>{{2, 0, 0}, {3, 0, 4}}));
  EXPECT_EQ(plan.buckets[3].pieces, (std::vector<BucketPiece>{{3, 4, 3}}));
  const std::vector<int64_t> elements{4, 4, 4, 3};
  const std::vector<int> gradients{1, 2, 2, 1};
  for (size_t b = 0; b < 4; ++b) {
    EXPECT_EQ(plan.buckets[b].elements, elements[b]) << b;
    EXPECT_EQ(plan.buckets[b].gradients, gradients[b]) << b;
  }
  EXPECT_EQ(plan.buckets_of, (std::vector<std::vector<int>>{{0, 1}, {1}, {2}, {2, 3}}));
}

TEST(GradBuckets, ALargeCapIsOneBucketOfWholeGradients) {
  const BucketPlan plan = plan_grad_buckets({3, 1, 2}, 25 << 20);
  ASSERT_EQ(plan.buckets.size(), 1u);
  EXPECT_EQ(plan.buckets[0].pieces, (std::vector<BucketPiece>{{0, 0, 3}, {1, 0, 1}, {2, 0, 2}}));
  EXPECT_EQ(plan.buckets[0].gradients, 3);
  EXPECT_TRUE(plan_grad_buckets({}, 4).buckets.empty());
}

TEST(GradBuckets, EveryElementIsInOnePieceInOrderAndEveryBucketButTheLastIsFull) {
  Rng rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> sizes(1 + rng.below(12));
    int64_t total = 0;
    for (auto& s : sizes)
      total += s = static_cast<int64_t>(rng.below(4) == 0 ? 0 : rng.below(50));
    const int64_t cap = 1 + static_cast<int64_t>(rng.below(40));
    const BucketPlan plan = plan_grad_buckets(sizes, cap);
    // The pieces, read in bucket order, walk every gradient from 0 to its end, one after another.
    size_t grad = 0;
    int64_t offset = 0, seen = 0;
    bool first = true;
    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      const GradBucket& bucket = plan.buckets[b];
      int64_t sum = 0;
      std::set<size_t> distinct;
      for (const BucketPiece& pc : bucket.pieces) {
        if (!first && pc.grad != grad) {
          ASSERT_EQ(offset, sizes[grad]) << "trial " << trial << ": gradient " << grad << " left unfinished";
          ASSERT_EQ(pc.grad, grad + 1) << "trial " << trial << " bucket " << b;
          grad = pc.grad;
          offset = 0;
        }
        ASSERT_EQ(pc.grad, grad) << "trial " << trial << " bucket " << b;
        ASSERT_EQ(pc.offset, offset) << "trial " << trial << " bucket " << b;
        first = false;
        offset += pc.count;
        sum += pc.count;
        distinct.insert(pc.grad);
        const auto& list = plan.buckets_of[pc.grad];
        EXPECT_NE(std::find(list.begin(), list.end(), static_cast<int>(b)), list.end());
      }
      EXPECT_EQ(bucket.elements, sum);
      EXPECT_EQ(bucket.gradients, static_cast<int>(distinct.size()));
      EXPECT_LE(sum, cap);
      if (b + 1 < plan.buckets.size())
        EXPECT_EQ(sum, cap) << "trial " << trial << ": only the last bucket may be short";
      seen += sum;
    }
    EXPECT_EQ(grad, sizes.size() - 1) << "trial " << trial;
    EXPECT_EQ(offset, sizes.back()) << "trial " << trial;
    EXPECT_EQ(seen, total) << "trial " << trial;
    for (size_t g = 0; g < sizes.size(); ++g)
      EXPECT_FALSE(plan.buckets_of[g].empty()) << "trial " << trial << ": gradient " << g << " in no bucket";
  }
}

TEST(GradBuckets, RefusesACapBelowOneAndANegativeSize) {
  try {
    plan_grad_buckets({3}, 0);
    FAIL() << "a cap of 0 must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bucket size is 0 elements"), std::string::npos) << e.what();
  }
  try {
    plan_grad_buckets({3, -1}, 4);
    FAIL() << "a negative size must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient 1 has -1 elements"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe::dist
