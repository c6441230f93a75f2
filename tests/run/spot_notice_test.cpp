// Spot notices against a local stand-in for the EC2 / GCP metadata servers
// (tests/support/fake_metadata_server.py, started and killed here, exiting by itself after 60 s):
// no notice -> nothing; a notice -> the callback within 2 polls; the IMDSv2 token is fetched and
// sent (and refreshed after a 401); GCP's Metadata-Flavor header; an absent server is no error.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/run/http_client.h"
#include "engine/run/spot_notice.h"
#include "tests/support/fake_metadata_server.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::FakeMetadataServer;

class SpotNoticeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = (fs::temp_directory_path() / ("lathe-notice-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name()))
              .string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    server = std::make_unique<FakeMetadataServer>(dir);
  }
  void TearDown() override {
    server.reset();
    fs::remove_all(dir);
  }
  NoticePollerOptions options(const std::string& provider) {
    NoticePollerOptions o;
    o.provider = provider;
    o.base_url = server->url;
    o.interval_s = 0.1;
    return o;
  }
  std::string dir;
  std::unique_ptr<FakeMetadataServer> server;
};

// Waits until `done()` or `limit` passes.
template <class F>
bool wait_for(F done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(5ms);
  return done();
}

TEST_F(SpotNoticeTest, Ec2WithoutANoticeGivesNothing) {
  std::atomic<int> calls{0};
  NoticePoller poller(options("ec2"), [&](const SpotNotice&) { ++calls; });
  ASSERT_TRUE(wait_for([&] { return poller.polls() >= 4; }, 5000ms));
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(poller.errors(), 0) << poller.last_error();
  const std::string log = server->log();
  EXPECT_NE(log.find("PUT /latest/api/token 200"), std::string::npos) << log;
  EXPECT_NE(log.find("GET /latest/meta-data/spot/instance-action 404"), std::string::npos) << log;
  // One token for all polls.
  EXPECT_EQ(log.find("PUT", log.find("PUT") + 1), std::string::npos) << log;
}

TEST_F(SpotNoticeTest, Ec2NoticeReachesTheCallbackWithinTwoPolls) {
  std::atomic<int> calls{0};
  std::atomic<int64_t> polls_at_notice{-1};
  SpotNotice got;
  std::mutex m;
  NoticePoller* self = nullptr;
  NoticePoller poller(options("ec2"), [&](const SpotNotice& n) {
    std::lock_guard<std::mutex> lock(m);
    got = n;
    polls_at_notice = self->polls();
    ++calls;
  });
  self = &poller;
  ASSERT_TRUE(wait_for([&] { return poller.polls() >= 2; }, 5000ms));
  const int64_t before = poller.polls();
  server->give_notice();
  ASSERT_TRUE(wait_for([&] { return calls.load() > 0; }, 5000ms));
  std::lock_guard<std::mutex> lock(m);
  EXPECT_LE(polls_at_notice.load() - before, 2);
  EXPECT_EQ(got.provider, "ec2");
  EXPECT_EQ(got.action, "terminate");
  EXPECT_EQ(got.time, "2026-12-03T18:00:00Z");
  // The poller stops after the notice: no second callback.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(SpotNoticeTest, Ec2TokenIsRequiredAndRefreshedAfterA401) {
  server->give_notice();
  // Without the token header the server refuses (so a poll that works did send it).
  EXPECT_EQ(http_request("GET", server->url + "/latest/meta-data/spot/instance-action").status, 401);
  std::string token = "expired";
  const auto notice = poll_ec2_notice(options("ec2"), token);
  ASSERT_TRUE(notice);
  EXPECT_EQ(token, "lathe-test-token");
  const std::string log = server->log();
  const size_t refused = log.find("instance-action 401");
  const size_t put = log.find("PUT /latest/api/token 200", refused);
  const size_t ok = log.find("instance-action 200", put);
  EXPECT_TRUE(refused != std::string::npos && put != std::string::npos && ok != std::string::npos) << log;
}

TEST_F(SpotNoticeTest, GcpPreemptedNeedsTheFlavorHeader) {
  EXPECT_EQ(http_request("GET", server->url + "/computeMetadata/v1/instance/preempted").status, 403);
  EXPECT_FALSE(poll_gcp_notice(options("gcp")));
  server->give_notice();
  const auto n = poll_gcp_notice(options("gcp"));
  ASSERT_TRUE(n);
  EXPECT_EQ(n->provider, "gcp");
}

TEST(SpotNoticeNoServer, AnUnreachableServerIsCountedNotThrown) {
  NoticePollerOptions o;
  o.base_url = "http://127.0.0.1:1";  // nothing listens on port 1
  o.interval_s = 0.05;
  o.timeout_s = 0.5;
  std::atomic<int> calls{0};
  NoticePoller poller(o, [&](const SpotNotice&) { ++calls; });
  ASSERT_TRUE(wait_for([&] { return poller.errors() >= 2; }, 5000ms));
  EXPECT_EQ(calls.load(), 0);
  EXPECT_NE(poller.last_error().find("cannot connect"), std::string::npos) << poller.last_error();
  EXPECT_THROW(http_request("GET", "https://example.com/"), Error);
}

}  // namespace
}  // namespace lathe
