// Deleting a run's files: only what lies inside the run's own folder and provably is the run's.
#include "engine/store/run_files.h"

#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/core/sha256.h"

namespace lathe {

namespace fs = std::filesystem;

namespace {

/// Where a recorded path may be: absolute as recorded; a relative one (runs from before paths were
/// stored absolute) against the current folder, then against the store's folder.
std::vector<fs::path> candidates(const std::string& recorded, const std::string& store_dir) {
  const fs::path p(recorded);
  if (p.empty())
    return {};
  if (p.is_absolute())
    return {p.lexically_normal()};
  std::vector<fs::path> out{fs::absolute(p).lexically_normal()};
  if (!store_dir.empty())
    out.push_back((fs::absolute(store_dir) / p).lexically_normal());
  return out;
}

bool exists_no_follow(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

/// True when `p` is strictly inside `folder` (both canonical: compared component by component).
bool inside(const fs::path& folder, const fs::path& p) {
  auto q = p.begin();
  for (auto f = folder.begin(); f != folder.end(); ++f, ++q)
    if (q == p.end() || *f != *q)
      return false;
  return q != p.end();
}

/// A trusted run folder: a real directory (not a symlink) named by the run id.
bool is_run_folder(const fs::path& dir, const std::string& run_id) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  return !ec && fs::is_directory(st) && dir.filename() == run_id;
}

std::string read_first_line(const fs::path& p, size_t limit) {
  std::ifstream in(p, std::ios::binary);
  std::string line;
  char c;
  while (line.size() < limit && in.get(c) && c != '\n')
    line.push_back(c);
  return line;
}

/// Why the file at `p` (inside `folder`) cannot be removed as `what`, or "" when it can.
std::string refuse_reason(const fs::path& p, const fs::path& folder, fs::path* resolved) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  if (fs::is_symlink(st))
    return "is a symbolic link, not a file the run wrote";
  const fs::path canon = fs::canonical(p, ec);
  if (ec)
    return ec.message();
  if (folder.empty() || !inside(folder, canon))
    return folder.empty() ? "no trusted run folder to delete from" : "is outside the run's folder " + folder.string();
  if (!fs::is_regular_file(fs::status(canon, ec)))
    return "is not a regular file";
  *resolved = canon;
  return "";
}

}  // namespace

std::string locate_run_folder(const RunFileFacts& facts, std::string* why) {
  std::vector<fs::path> dirs;
  if (!facts.recorded_dir.empty()) {
    dirs = candidates(facts.recorded_dir, facts.store_dir);
  } else {
    for (const ArtifactRecord& a : facts.artifacts)
      for (const fs::path& c : candidates(a.path, facts.store_dir))
        dirs.push_back(c.parent_path());
  }
  bool seen = false;
  for (const fs::path& d : dirs) {
    if (!exists_no_follow(d))
      continue;
    seen = true;
    if (!is_run_folder(d, facts.run_id))
      continue;
    std::error_code ec;
    const fs::path canon = fs::canonical(d, ec);
    if (!ec && canon.filename() == facts.run_id)
      return canon.string();
  }
  if (why)
    *why = dirs.empty() ? "the store records no folder for this run"
           : seen       ? "the recorded folder is not a real folder named " + facts.run_id
                        : "its folder " + dirs.front().string() + " no longer exists";
  return "";
}

void delete_run_files(const RunFileFacts& facts, DeleteResult& result) {
  std::string why;
  const fs::path folder = locate_run_folder(facts, &why);
  result.folder = folder.string();

  auto remove = [&](const fs::path& canon, const std::string& shown) {
    std::error_code ec;
    if (fs::remove(canon, ec))
      result.files_deleted.push_back(shown);
    else
      result.files_failed.push_back(shown + ": " + (ec ? ec.message() : "could not be removed"));
  };

  for (const ArtifactRecord& a : facts.artifacts) {
    fs::path at;
    for (const fs::path& c : candidates(a.path, facts.store_dir))
      if (exists_no_follow(c)) {
        at = c;
        break;
      }
    if (at.empty()) {
      result.files_missing.push_back(a.path);
      continue;
    }
    fs::path canon;
    std::string reason = refuse_reason(at, folder, &canon);
    if (reason.empty() && (a.bytes < 0 || a.sha256.empty()))
      reason = "was missing when the run recorded it, so it cannot be proven the run's";
    if (reason.empty()) {
      int64_t bytes = -1;
      std::string sha;
      try {
        sha = sha256_file(canon.string(), &bytes);
      } catch (const DataError& e) {
        reason = e.what();
      }
      if (reason.empty() && (bytes != a.bytes || sha != a.sha256))
        reason = "changed since the run recorded it (" + std::to_string(bytes) + " bytes now, " +
                 std::to_string(a.bytes) + " recorded, or another sha256)";
    }
    if (reason.empty())
      remove(canon, at.string());
    else
      result.files_failed.push_back(at.string() + ": kept: " + reason);
  }
  if (folder.empty()) {
    if (!facts.artifacts.empty() || !facts.recorded_dir.empty())
      result.files_failed.push_back("run folder: " + why);
    return;
  }

  // The two files every run folder has, each checked against what the store knows of the run.
  const fs::path config = folder / "config.json";
  fs::path canon;
  if (exists_no_follow(config) && refuse_reason(config, folder, &canon).empty()) {
    std::ifstream in(canon, std::ios::binary);
    const nlohmann::json on_disk = nlohmann::json::parse(in, nullptr, false);
    if (!on_disk.is_discarded() && on_disk == facts.config)
      remove(canon, config.string());
    else
      result.files_failed.push_back(config.string() + ": kept: it differs from the config the store holds");
  }
  const fs::path metrics = folder / "metrics.jsonl";
  if (exists_no_follow(metrics) && refuse_reason(metrics, folder, &canon).empty()) {
    const nlohmann::json first = nlohmann::json::parse(read_first_line(canon, 1 << 20), nullptr, false);
    if (first.is_object() && first.value("event", "") == "started" && first.value("run_id", "") == facts.run_id)
      remove(canon, metrics.string());
    else
      result.files_failed.push_back(metrics.string() + ": kept: it does not start with this run's started event");
  }

  std::error_code ec;
  std::vector<std::string> left;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec))
    left.push_back(e.path().filename().string());
  if (!ec && left.empty() && fs::remove(folder, ec)) {
    result.folder_removed = true;
  } else if (!left.empty()) {
    std::string list;
    for (size_t i = 0; i < left.size() && i < 5; ++i)
      list += (i ? ", " : "") + left[i];
    if (left.size() > 5)
      list += ", ...";
    result.files_failed.push_back(folder.string() + ": folder kept, it still holds " + std::to_string(left.size()) +
                                  " file(s) the run did not record: " + list);
  }
}

}  // namespace lathe
