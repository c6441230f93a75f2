// Run ids and run folders (atomic small-file writes: engine/core/file_write.h).
#include "engine/run/run_dir.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <random>

#include "engine/core/error.h"

namespace lathe {

std::string make_run_id() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  std::random_device rd;
  const uint32_t r = (rd() ^ static_cast<uint32_t>(getpid()) * 2654435761u) & 0xffffffu;
  char suffix[8];
  std::snprintf(suffix, sizeof(suffix), "%06x", r);
  return std::string(stamp) + "-" + suffix;
}

std::string create_run_dir(const std::string& root, const std::string& id) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    throw DataError("cannot create the runs folder " + root + ": " + ec.message() + " (set output.dir)");
  const fs::path dir = fs::path(root) / id;
  if (!fs::create_directory(dir, ec) || ec)
    throw DataError("cannot create run folder " + dir.string() + (ec ? ": " + ec.message() : ": it already exists"));
  // Absolute, so the artifact paths recorded under it mean the same file from any folder.
  return fs::absolute(dir).lexically_normal().string();
}

}  // namespace lathe
