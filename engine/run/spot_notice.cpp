// The EC2 and GCP notice polls and the poller thread (see spot_notice.h).
#include "engine/run/spot_notice.h"

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/run/http_client.h"

namespace lathe {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::none:
      return "none";
    case StopReason::user:
      return "user";
    case StopReason::signal:
      return "signal";
    case StopReason::spot_notice:
      return "spot_notice";
  }
  return "none";
}

namespace {
std::string trim_slash(std::string s) {
  while (!s.empty() && s.back() == '/')
    s.pop_back();
  return s;
}
}  // namespace

std::optional<SpotNotice> poll_ec2_notice(const NoticePollerOptions& o, std::string& token) {
  const std::string base = trim_slash(o.base_url);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (token.empty()) {
      const HttpResponse t =
          http_request("PUT", base + "/latest/api/token",
                       {{"X-aws-ec2-metadata-token-ttl-seconds", std::to_string(o.token_ttl_s)}}, "", o.timeout_s);
      if (t.status != 200 || t.body.empty())
        throw Error("EC2 metadata token from " + base + ": HTTP " + std::to_string(t.status));
      token = t.body;
    }
    const HttpResponse r = http_request("GET", base + "/latest/meta-data/spot/instance-action",
                                        {{"X-aws-ec2-metadata-token", token}}, "", o.timeout_s);
    if (r.status == 404)
      return std::nullopt;
    if (r.status == 401) {  // the token expired: fetch a new one once
      token.clear();
      continue;
    }
    if (r.status != 200)
      throw Error("EC2 spot/instance-action from " + base + ": HTTP " + std::to_string(r.status));
    SpotNotice n{"ec2", "terminate", ""};
    try {
      const nlohmann::json j = nlohmann::json::parse(r.body);
      n.action = j.value("action", "terminate");
      n.time = j.value("time", "");
    } catch (const nlohmann::json::exception&) {
      // A notice we cannot read is still a notice: the machine is going.
    }
    return n;
  }
  throw Error("EC2 spot/instance-action from " + base + ": the metadata token is refused (HTTP 401)");
}

std::optional<SpotNotice> poll_gcp_notice(const NoticePollerOptions& o) {
  const std::string base = trim_slash(o.base_url);
  const HttpResponse r = http_request("GET", base + "/computeMetadata/v1/instance/preempted",
                                      {{"Metadata-Flavor", "Google"}}, "", o.timeout_s);
  if (r.status != 200)
    throw Error("GCP instance/preempted from " + base + ": HTTP " + std::to_string(r.status));
  if (r.body.rfind("TRUE", 0) == 0)
    return SpotNotice{"gcp", "preempted", ""};
  return std::nullopt;
}

NoticePoller::NoticePoller(NoticePollerOptions options, std::function<void(const SpotNotice&)> on_notice)
    : m_options(std::move(options)), m_on_notice(std::move(on_notice)) {
  LATHE_CHECK(m_options.provider == "ec2" || m_options.provider == "gcp", "NoticePoller: provider '",
              m_options.provider, "' (ec2 or gcp)");
  LATHE_CHECK(m_options.interval_s > 0, "NoticePoller: interval ", m_options.interval_s);
  m_thread = std::thread([this] { loop(); });
}

NoticePoller::~NoticePoller() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable())
    m_thread.join();
}

std::string NoticePoller::last_error() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_last_error;
}

void NoticePoller::loop() {
  std::string token;
  while (true) {
    std::optional<SpotNotice> notice;
    try {
      notice = m_options.provider == "ec2" ? poll_ec2_notice(m_options, token) : poll_gcp_notice(m_options);
    } catch (const std::exception& e) {
      ++m_errors;
      std::lock_guard<std::mutex> lock(m_mutex);
      m_last_error = e.what();
    }
    ++m_polls;
    if (notice) {
      m_on_notice(*notice);
      return;  // one notice per machine: the run is stopping
    }
    std::unique_lock<std::mutex> lock(m_mutex);
    if (m_wake.wait_for(lock, std::chrono::duration<double>(m_options.interval_s), [this] { return m_stop; }))
      return;
  }
}

}  // namespace lathe
