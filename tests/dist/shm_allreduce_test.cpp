// ShmAllReduce on its own, in one process: two calls at once on one rank are refused (the
// generation counters are shared, so a second thread would corrupt the first one's chunk), and a
// rank that never maps the segment is named at the timeout.
#include "engine/dist/shm_allreduce.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "engine/core/error.h"

using lathe::dist::ShmAllReduce;

TEST(ShmAllReduce, TwoCallsAtOnceOnOneRankAreRefused) {
  const std::string name = "/lathe-test-busy-" + std::to_string(getpid());
  ShmAllReduce::create(name, 2, 64);
  ShmAllReduce rank0(name, 0, 2, 64, std::chrono::milliseconds(1500));
  ShmAllReduce::unlink(name);
  std::string first_error;
  std::thread first([&] {
    double v[3] = {1, 2, 3};
    try {
      rank0.all_reduce_sum(v, 3);  // rank 1 never comes: waits until the timeout
    } catch (const lathe::Error& e) {
      first_error = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  float g[4] = {1, 2, 3, 4};
  try {
    rank0.all_reduce_mean({{g, 4}}, 1.0f);
    ADD_FAILURE() << "a second call while the first waits was accepted";
  } catch (const lathe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("two shared-memory collectives at once"), std::string::npos) << e.what();
  }
  first.join();
  EXPECT_NE(first_error.find("rank 1 did not bring its values within 1.5"), std::string::npos) << first_error;
  // Free again after the first call ended: a one-rank sum of the others' absence still times out,
  // but is admitted.
  try {
    rank0.all_reduce_mean({{g, 4}}, 1.0f);
  } catch (const lathe::Error& e) {
    EXPECT_EQ(std::string(e.what()).find("at once"), std::string::npos) << e.what();
  }
}
