// JsonlSink on a full disk (issue 11, item 4): one warning naming the file (stderr and the failure
// handler, which the trainer turns into a store event), the partial line cut off, nothing written
// after it, and the run goes on. RLIMIT_FSIZE in a forked child gives EFBIG after N bytes.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/run/metrics_sink.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

TEST(JsonlSink, FullDiskWarnsOnceCutsThePartialLineAndStops) {
  const fs::path dir = fs::temp_directory_path() / ("lathe_jsonl_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "metrics.jsonl").string();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit rl{2000, 2000};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    int calls = 0;
    std::string message;
    {
      JsonlSink sink(path);
      sink.on_failure([&](const std::string& m) {
        ++calls;
        message = m;
      });
      for (int step = 0; step < 200; ++step)  // ~60 bytes a line: the limit hits mid-way
        sink.sample("train/loss", step, step * 1.5, 1.0 / (step + 1));
      sink.event("finished", {{"steps", 200}});
      if (sink.ok())
        message = "sink still ok";
    }
    const std::string out = std::to_string(calls) + "|" + message;
    [[maybe_unused]] const ssize_t n = ::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0)
    out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));  // SIGXFSZ ignored: the child was not killed, the run went on
  EXPECT_EQ(out, "1|writing " + path + ": File too large");

  // The file holds whole lines only: every line parses, steps 0..k-1 without a gap.
  std::ifstream in(path);
  std::string line;
  int64_t lines = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "line " << lines << ": " << line;
    EXPECT_EQ(j["step"], lines);
    ++lines;
  }
  EXPECT_GT(lines, 10);
  EXPECT_LT(lines, 200);
  EXPECT_LE(fs::file_size(path), 2000u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lathe
