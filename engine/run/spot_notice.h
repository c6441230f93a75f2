// Spot / preemption notices: why a run was asked to stop, and a poller thread that asks the
// cloud's metadata server every few seconds whether this machine is about to go away.
//   EC2 (IMDSv2): PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds, then
//     GET /latest/meta-data/spot/instance-action with X-aws-ec2-metadata-token; 404 = no notice,
//     200 = {"action": "terminate|stop|hibernate", "time": "2026-12-03T18:00:00Z"}; 401 = the
//     token expired (a new one is fetched).
//   GCP: GET /computeMetadata/v1/instance/preempted with Metadata-Flavor: Google; "TRUE" = notice.
// AWS advises polling every 5 s; the base URL is configurable so tests use a local server.
// SIGTERM (what EC2, GCP and Kubernetes also send) is handled by lathe-cli, which sets the same
// stop flag with the reason `signal`.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace lathe {

/// Why a run was asked to stop. Stored in a std::atomic<int> so a signal handler may set it.
enum class StopReason : int { none = 0, user = 1, signal = 2, spot_notice = 3 };
const char* stop_reason_name(StopReason r);

struct SpotNotice {
  std::string provider;  ///< "ec2" | "gcp"
  std::string action;    ///< ec2: terminate / stop / hibernate; gcp: preempted
  std::string time;      ///< ec2: when the machine goes (UTC, ISO 8601); gcp: ""
};

struct NoticePollerOptions {
  std::string provider = "ec2";                     ///< "ec2" | "gcp"
  std::string base_url = "http://169.254.169.254";  ///< no trailing slash needed
  double interval_s = 5;
  double timeout_s = 2;  ///< per HTTP request
  int token_ttl_s = 21600;
};

/// One EC2 poll. `token` is reused and refreshed (empty = fetch one first; cleared on 401).
/// Throws lathe::Error when the server cannot be reached or answers something unexpected.
std::optional<SpotNotice> poll_ec2_notice(const NoticePollerOptions& o, std::string& token);
/// One GCP poll.
std::optional<SpotNotice> poll_gcp_notice(const NoticePollerOptions& o);

/// Polls on its own thread from construction until a notice arrives (on_notice is called once,
/// from the poller thread) or the poller is destroyed. Errors (no metadata server) are counted and
/// kept, not thrown: a run off the cloud keeps training.
class NoticePoller {
 public:
  NoticePoller(NoticePollerOptions options, std::function<void(const SpotNotice&)> on_notice);
  ~NoticePoller();
  NoticePoller(const NoticePoller&) = delete;
  NoticePoller& operator=(const NoticePoller&) = delete;

  int64_t polls() const { return m_polls.load(); }
  int64_t errors() const { return m_errors.load(); }
  std::string last_error() const;

 private:
  void loop();
  NoticePollerOptions m_options;
  std::function<void(const SpotNotice&)> m_on_notice;
  std::atomic<int64_t> m_polls{0}, m_errors{0};
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  std::string m_last_error;
  std::thread m_thread;
};

}  // namespace lathe
