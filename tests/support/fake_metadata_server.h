// Test helper: starts tests/support/fake_metadata_server.py (a stand-in for the EC2 / GCP metadata
// servers on 127.0.0.1, exiting by itself after 60 s) and kills it when destroyed.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/core/error.h"

namespace lathe::test {

class FakeMetadataServer {
 public:
  explicit FakeMetadataServer(const std::string& dir) : notice_file(dir + "/notice"), log_file(dir + "/requests.log") {
    int out[2];
    if (::pipe(out) != 0)
      throw Error("pipe failed");
    const std::string script = LATHE_SOURCE_DIR "/tests/support/fake_metadata_server.py";
    m_pid = ::fork();
    if (m_pid == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      ::execlp("python3", "python3", script.c_str(), "--notice-file", notice_file.c_str(), "--log", log_file.c_str(),
               "--lifetime-s", "60", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    char c;
    while (::read(out[0], &c, 1) == 1 && c != '\n')
      line += c;
    ::close(out[0]);
    if (line.rfind("PORT ", 0) != 0)
      throw Error("fake metadata server did not start: '" + line + "'");
    url = "http://127.0.0.1:" + line.substr(5);
  }
  ~FakeMetadataServer() {
    if (m_pid > 0) {
      ::kill(m_pid, SIGKILL);
      ::waitpid(m_pid, nullptr, 0);
    }
  }
  void give_notice() const { std::ofstream(notice_file) << "now"; }
  /// A new machine: no notice pending.
  void clear_notice() const { std::remove(notice_file.c_str()); }
  std::string log() const {
    std::ifstream in(log_file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string notice_file, log_file, url;

 private:
  pid_t m_pid = -1;
};

}  // namespace lathe::test
