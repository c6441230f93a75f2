// Checkpoint folders: atomic write (temporary folder, fsync, rename, parent fsync), retention,
// verification against the manifest, and the newest-valid search (see checkpoint.h).
#include "engine/run/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/file_write.h"
#include "engine/core/sha256.h"
#include "engine/core/timing.h"
#include "engine/nn/safetensors.h"

namespace lathe {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTensorsFile = "tensors.safetensors";
constexpr const char* kStateFile = "state.json";
constexpr const char* kManifestFile = "MANIFEST.json";
constexpr const char* kPrefix = "step-";

std::string folder_name(int64_t step) {
  std::string digits = std::to_string(step);
  return kPrefix + std::string(digits.size() < 12 ? 12 - digits.size() : 0, '0') + digits;
}

// The step a folder name stands for, or -1 when it is not a checkpoint folder.
int64_t step_of(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0 || name.size() <= std::string(kPrefix).size())
    return -1;
  const std::string digits = name.substr(std::string(kPrefix).size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 18)
    return -1;
  return std::stoll(digits);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw DataError("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json file_entry(const std::string& path) {
  int64_t bytes = 0;
  const std::string sha = sha256_file(path, &bytes);
  return {{"bytes", bytes}, {"sha256", sha}};
}

}  // namespace

CheckpointInfo write_checkpoint(const std::string& dir, int64_t step, const CheckpointData& data, int64_t keep) {
  LATHE_CHECK(step >= 0 && keep >= 1, "write_checkpoint: step ", step, ", keep ", keep);
  const auto t0 = Clock::now();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error("creating checkpoint folder " + dir + ": " + ec.message());
  const std::string final_path = (fs::path(dir) / folder_name(step)).string();
  const std::string tmp = (fs::path(dir) / (".tmp-" + folder_name(step) + "-" + std::to_string(::getpid()))).string();
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec)
    throw Error("creating checkpoint folder " + tmp + ": " + ec.message());
  try {
    const std::string tensors = tmp + "/" + kTensorsFile;
    save_safetensors(tensors, data.tensors, {{"lathe_checkpoint_step", std::to_string(step)}});
    nlohmann::json state = data.state;
    state["format"] = kCheckpointFormat;
    state["step"] = step;
    write_file_atomic(tmp + "/" + kStateFile, state.dump(1));
    const nlohmann::json manifest = {
        {"format", kCheckpointFormat},
        {"step", step},
        {"files", {{kTensorsFile, file_entry(tensors)}, {kStateFile, file_entry(tmp + "/" + kStateFile)}}}};
    write_file_atomic(tmp + "/" + kManifestFile, manifest.dump(1));
    fsync_dir(tmp);
    // A checkpoint of the same step (an emergency one at a periodic step) is replaced.
    const std::string old = final_path + ".old-" + std::to_string(::getpid());
    const bool replacing = fs::exists(final_path);
    if (replacing) {
      fs::rename(final_path, old, ec);
      if (ec)
        throw Error("renaming " + final_path + ": " + ec.message());
    }
    fs::rename(tmp, final_path, ec);
    if (ec)
      throw Error("renaming " + tmp + " to " + final_path + ": " + ec.message());
    fsync_dir(dir);
    if (replacing)
      fs::remove_all(old, ec);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }

  // Retention: the newest `keep` stay; older ones and stale temporaries go.
  std::vector<std::string> all = list_checkpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i)
    fs::remove_all(all[i], ec);
  remove_stale_checkpoint_temporaries(dir);

  CheckpointInfo info;
  info.path = final_path;
  info.step = step;
  for (const char* f : {kTensorsFile, kStateFile, kManifestFile})
    info.bytes += static_cast<int64_t>(fs::file_size(final_path + "/" + f, ec));
  info.write_s = seconds_since(t0);
  return info;
}

void remove_stale_checkpoint_temporaries(const std::string& dir) {
  std::error_code ec;
  const std::string mine = "-" + std::to_string(::getpid());
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-", 0) == 0 &&
        (name.size() < mine.size() || name.compare(name.size() - mine.size(), mine.size(), mine) != 0))
      fs::remove_all(entry.path(), ec);  // left by a killed writer
  }
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return {};
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of(entry.path().filename().string());
    if (step >= 0 && entry.is_directory(ec))
      found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [_, path] : found)
    out.push_back(std::move(path));
  return out;
}

std::string verify_checkpoint(const std::string& folder) {
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read_text(folder + "/" + kManifestFile));
  } catch (const std::exception& e) {
    return std::string(kManifestFile) + " cannot be read (" + e.what() + ")";
  }
  if (!manifest.is_object() || !manifest.contains("files") || !manifest["files"].is_object())
    return std::string(kManifestFile) + " has no \"files\" object";
  if (manifest.value("format", 0) > kCheckpointFormat)
    return "format " + manifest["format"].dump() + " is newer than this build's " + std::to_string(kCheckpointFormat);
  for (const char* name : {kTensorsFile, kStateFile}) {
    if (!manifest["files"].contains(name))
      return std::string(kManifestFile) + " does not list " + name;
    const nlohmann::json& want = manifest["files"][name];
    if (!want.is_object() || !want.contains("bytes") || !want.contains("sha256") ||
        !want["bytes"].is_number_integer() || !want["sha256"].is_string())
      return std::string(kManifestFile) + " entry for " + name + " is malformed";
    const std::string path = folder + "/" + name;
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec)
      return std::string(name) + " is missing";
    const int64_t expected = want["bytes"].get<int64_t>();
    if (static_cast<int64_t>(size) != expected)
      return std::string(name) + " has " + std::to_string(size) + " bytes, the manifest says " +
             std::to_string(expected) + " (truncated?)";
    try {
      if (sha256_file(path) != want["sha256"].get<std::string>())
        return std::string(name) + ": sha256 differs from the manifest's (corrupt)";
    } catch (const std::exception& e) {
      return std::string(name) + " cannot be read (" + e.what() + ")";
    }
  }
  return "";
}

std::optional<LoadedCheckpoint> load_newest_checkpoint(const std::string& dir,
                                                       std::vector<std::string>* skipped_when_none) {
  const std::vector<std::string> all = list_checkpoints(dir);
  std::vector<std::string> bad;  // "DIR (REASON)" for each newer one passed over
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    std::string reason = verify_checkpoint(*it);
    LoadedCheckpoint out;
    if (reason.empty()) {
      try {
        out.data.state = nlohmann::json::parse(read_text(*it + "/" + kStateFile));
        SafetensorsFile file = load_safetensors(*it + "/" + kTensorsFile);
        out.data.tensors = std::move(file.tensors);
      } catch (const std::exception& e) {
        reason = e.what();
      }
    }
    if (!reason.empty()) {
      bad.push_back(*it + " (" + reason + ")");
      continue;
    }
    out.info.path = *it;
    out.info.step = out.data.state.value("step", int64_t{0});
    std::error_code ec;
    for (const char* f : {kTensorsFile, kStateFile, kManifestFile})
      out.info.bytes += static_cast<int64_t>(fs::file_size(*it + "/" + f, ec));
    for (const std::string& b : bad)
      out.skipped.push_back("checkpoint " + b + " is not usable; using the previous one, step " +
                            std::to_string(out.info.step));
    return out;
  }
  if (skipped_when_none)
    for (const std::string& b : bad)
      skipped_when_none->push_back("checkpoint " + b + " is not usable");
  return std::nullopt;
}

}  // namespace lathe
