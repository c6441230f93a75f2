// The report's one-line description of a run's started event: backend and device, threads, the
// OpenMP wait policy the throughput was measured under, and the sizes; fields a run did not write
// (runs older than the policy field) are left out rather than printed empty.
#include <gtest/gtest.h>

#include "widgets/report/report_events.h"

TEST(ReportEvents, StartedSaysThreadsAndTheOpenMpWaitPolicy) {
  lathe::EventRecord e;
  e.kind = "started";
  e.fields = {{"backend", "cpu"},        {"device", "Xeon"},        {"threads", 2},
              {"omp_wait_policy", "passive"}, {"train_samples", 60000}, {"test_samples", 10000}};
  const std::string text = lathe::report::describe_event(e);
  EXPECT_NE(text.find("backend cpu on Xeon"), std::string::npos) << text;
  EXPECT_NE(text.find("threads 2"), std::string::npos) << text;
  EXPECT_NE(text.find("OpenMP wait passive"), std::string::npos) << text;
  e.fields.erase("omp_wait_policy");
  const std::string older = lathe::report::describe_event(e);
  EXPECT_EQ(older.find("OpenMP wait"), std::string::npos) << older;
  EXPECT_NE(older.find("threads 2"), std::string::npos) << older;
}
