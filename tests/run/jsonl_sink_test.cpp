// JsonlSink on a full disk (issue 11, item 4): one warning naming the file (stderr and the failure
// handler, which the trainer turns into a store event), the partial line cut off, nothing written
// after it, and the run goes on. RLIMIT_FSIZE in a forked child gives EFBIG after N bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/run/metrics_sink.h"
#include "tests/support/file_size_limit.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

TEST(JsonlSink, FullDiskWarnsOnceCutsThePartialLineAndStops) {
  const fs::path dir = fs::temp_directory_path() / ("lathe_jsonl_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "metrics.jsonl").string();
  const test::ChildResult child = test::in_child_with_file_limit(2000, [&] {
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
    return std::to_string(calls) + "|" + message;
  });
  const std::string& out = child.out;
  EXPECT_TRUE(child.exited);  // SIGXFSZ ignored: the child was not killed, the run went on
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
