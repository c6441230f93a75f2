// Store::delete_run removes only what provably belongs to the run: files inside the run's own
// folder (symlinks resolved) whose size and sha256 match the record, the config.json equal to the
// stored config, the metrics.jsonl that starts with the run's started event, then the folder.
// A store that points artifacts anywhere else (edited, or copied from another machine) deletes
// nothing outside the folder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/store/run_writer.h"
#include "engine/store/store.h"
#include "store_test_util.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using test::StoreDir;

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

/// A run as the trainer leaves it: runs/<id>/ with config.json, metrics.jsonl and a model file,
/// recorded with absolute paths and the folder in the started event.
struct FakeRun {
  std::string id;
  fs::path folder;
  nlohmann::json config{{"name", "x"}, {"train", {{"epochs", 1}}}};

  FakeRun(const StoreDir& dir, std::string run_id) : id(std::move(run_id)), folder(fs::path(dir.path()) / "runs" / id) {
    fs::create_directories(folder);
    write(folder / "config.json", config.dump(2) + "\n");
    write(folder / "metrics.jsonl", nlohmann::json{{"event", "started"}, {"run_id", id}}.dump() + "\n" +
                                        R"({"metric":"m","step":1,"wall_ms":1,"value":1})" + "\n");
    write(folder / "model.safetensors", "weights");
  }
  /// Records the run; `artifacts` are (kind, path) pairs recorded as they are given.
  void record(const std::string& db, const std::vector<std::pair<std::string, std::string>>& artifacts,
              bool with_dir = true) const {
    RunWriter w(db);
    RunInfo info;
    info.id = id;
    info.config = config;
    w.begin_run(info);
    nlohmann::json started{{"run_id", id}};
    if (with_dir)
      started["run_dir"] = folder.string();
    w.event("started", started);
    w.sample("m", 1, 0, 1.0);
    for (const auto& [kind, path] : artifacts)
      w.artifact(kind, path);
    w.finish(RunStatus::finished);
  }
};

bool any_contains(const std::vector<std::string>& v, const std::string& text) {
  for (const std::string& s : v)
    if (s.find(text) != std::string::npos)
      return true;
  return false;
}

TEST(StoreDelete, RemovesTheRunsFilesAndItsFolder) {
  StoreDir dir;
  FakeRun run(dir, "20260101-000000-aaaaaa");
  run.record(dir.db(), {{"model", (run.folder / "model.safetensors").string()}});
  Store s = Store::open(dir.db());
  const DeleteResult r = s.delete_run(run.id);
  EXPECT_TRUE(r.files_failed.empty()) << r.files_failed.front();
  EXPECT_EQ(r.files_deleted.size(), 3u);  // the model, config.json, metrics.jsonl
  EXPECT_TRUE(r.folder_removed);
  EXPECT_FALSE(fs::exists(run.folder));
  EXPECT_TRUE(fs::exists(fs::path(dir.path()) / "runs"));  // only the run's own folder goes
}

TEST(StoreDelete, NeverRemovesAFileOutsideTheRunsFolder) {
  StoreDir dir;
  FakeRun run(dir, "20260101-000000-bbbbbb");
  const fs::path victim = fs::path(dir.path()) / "victim.txt";
  write(victim, "precious");
  fs::create_directories(fs::path(dir.path()) / "other");
  const fs::path victim2 = fs::path(dir.path()) / "other" / "file.bin";
  write(victim2, "also precious");
  // Absolute and ../ paths that the store claims are the run's artifacts (their real digests
  // recorded, as an edited store would have them).
  run.record(dir.db(),
             {{"model", victim.string()}, {"model", (run.folder / ".." / ".." / "other" / "file.bin").string()}});
  Store s = Store::open(dir.db());
  const DeleteResult r = s.delete_run(run.id);
  EXPECT_TRUE(fs::exists(victim));
  EXPECT_TRUE(fs::exists(victim2));
  EXPECT_TRUE(fs::exists(fs::path(dir.path()) / "other"));
  EXPECT_TRUE(any_contains(r.files_failed, "outside the run's folder"));
}

TEST(StoreDelete, ASymlinkInsideTheFolderDoesNotReachOutside) {
  StoreDir dir;
  FakeRun run(dir, "20260101-000000-cccccc");
  const fs::path victim = fs::path(dir.path()) / "victim.txt";
  write(victim, "precious");
  fs::remove(run.folder / "model.safetensors");
  fs::create_symlink(victim, run.folder / "model.safetensors");  // digest recorded through the link
  run.record(dir.db(), {{"model", (run.folder / "model.safetensors").string()}});
  Store s = Store::open(dir.db());
  const DeleteResult r = s.delete_run(run.id);
  EXPECT_TRUE(fs::exists(victim));
  EXPECT_TRUE(any_contains(r.files_failed, "symbolic link"));
  EXPECT_FALSE(r.folder_removed);  // the link is still in it
}

TEST(StoreDelete, AFolderThatIsASymlinkOrMisnamedIsNotTrusted) {
  StoreDir dir;
  FakeRun run(dir, "20260101-000000-dddddd");
  // The started event names a folder that is not the run's (another name): nothing is deleted.
  const fs::path elsewhere = fs::path(dir.path()) / "home";
  fs::create_directories(elsewhere);
  write(elsewhere / "config.json", run.config.dump());
  {
    RunWriter w(dir.db());
    RunInfo info;
    info.id = run.id;
    info.config = run.config;
    w.begin_run(info);
    w.event("started", {{"run_id", run.id}, {"run_dir", elsewhere.string()}});
    w.finish(RunStatus::finished);
  }
  Store s = Store::open(dir.db());
  const DeleteResult r = s.delete_run(run.id);
  EXPECT_TRUE(r.files_deleted.empty());
  EXPECT_TRUE(fs::exists(elsewhere / "config.json"));
  EXPECT_TRUE(r.folder.empty());
  EXPECT_TRUE(any_contains(r.files_failed, "not a real folder named"));
}

TEST(StoreDelete, AChangedArtifactAndUnrecordedFilesAreKept) {
  StoreDir dir;
  FakeRun run(dir, "20260101-000000-eeeeee");
  run.record(dir.db(), {{"model", (run.folder / "model.safetensors").string()}});
  write(run.folder / "model.safetensors", "replaced by the user");
  write(run.folder / "notes.txt", "mine");
  Store s = Store::open(dir.db());
  const DeleteResult r = s.delete_run(run.id);
  EXPECT_TRUE(fs::exists(run.folder / "model.safetensors"));
  EXPECT_TRUE(fs::exists(run.folder / "notes.txt"));
  EXPECT_FALSE(fs::exists(run.folder / "config.json"));
  EXPECT_TRUE(any_contains(r.files_failed, "changed since the run recorded it"));
  EXPECT_TRUE(any_contains(r.files_failed, "notes.txt"));
  EXPECT_FALSE(r.folder_removed);
}

TEST(StoreDelete, AConfigOrMetricsFileOfAnotherRunIsKept) {
  StoreDir dir;
  FakeRun run(dir, "20260101-000000-ffffff");
  write(run.folder / "config.json", R"({"name": "someone else"})");
  write(run.folder / "metrics.jsonl", R"({"event":"started","run_id":"another"})"
                                      "\n");
  run.record(dir.db(), {{"model", (run.folder / "model.safetensors").string()}});
  Store s = Store::open(dir.db());
  const DeleteResult r = s.delete_run(run.id);
  EXPECT_TRUE(fs::exists(run.folder / "config.json"));
  EXPECT_TRUE(fs::exists(run.folder / "metrics.jsonl"));
  EXPECT_FALSE(fs::exists(run.folder / "model.safetensors"));
  EXPECT_TRUE(any_contains(r.files_failed, "differs from the config"));
  EXPECT_TRUE(any_contains(r.files_failed, "started event"));
}

/// Runs recorded before paths were absolute have paths relative to where they were started; a
/// delete from another folder finds them next to the store.
TEST(StoreDelete, OldRelativePathsAreFoundNextToTheStoreFromAnyFolder) {
  StoreDir dir;
  FakeRun run(dir, "20260101-000000-a0a0a0");
  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir.path());
  run.record(dir.db(), {{"model", "runs/" + run.id + "/model.safetensors"}}, /*with_dir=*/false);
  fs::create_directories(fs::path(dir.path()) / "elsewhere");
  fs::current_path(fs::path(dir.path()) / "elsewhere");
  Store s = Store::open(dir.db());
  const DeleteResult r = s.delete_run(run.id);
  fs::current_path(old_cwd);
  EXPECT_TRUE(r.files_failed.empty()) << r.files_failed.front();
  EXPECT_FALSE(fs::exists(run.folder));
}

}  // namespace
}  // namespace lathe
