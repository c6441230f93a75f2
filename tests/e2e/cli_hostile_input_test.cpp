// lathe-cli against hostile input, as the hardening issue found it: a store edited to point
// artifacts at other files, deletes from another folder, a bad output.dir, numbers no double holds,
// invalid UTF-8, duplicate keys, layer lists that cannot work, a bogus --sort, names with control
// characters, and a store this process may not write. Each must be refused with a message that
// names the field, or handled without touching anything outside the run.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "engine/data/dataset.h"
#include "tests/support/fashion_mnist.h"

namespace {

using lathe::test::Cli;
using lathe::test::CmdResult;
using lathe::test::run_cmd;
using lathe::test::run_shell;
namespace fs = std::filesystem;

using lathe::test::have_fashion_mnist;

/// Runs one SQL statement on the store file directly, as a user editing it would.
void edit_store(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(h);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

class CliHostile : public Cli {
 protected:
  /// A tiny finished run (student, 256 images) whose run folder is `output_dir` as given (it may be
  /// relative to `cwd`); returns its id.
  std::string tiny_run(const std::string& output_dir = "", const fs::path& cwd = {}) {
    const std::string cfg = write("tiny.json", R"({"name": "tiny", "model": {"zoo": "student"}, "train": {"epochs": 1},
                                                   "data": {"train_subset": 256, "test_subset": 100}})");
    const std::string out = output_dir.empty() ? (m_dir / "runs").string() : output_dir;
    const std::string cd = cwd.empty() ? "" : "cd " + cwd.string() + " && ";
    const CmdResult r =
        run_shell(cd + lathe::test::cli_binary() + " run " + cfg + " --db " + db() + " --set output.dir=" + out);
    EXPECT_EQ(r.code, 0) << r.out;
    const auto list = nlohmann::json::parse(run_cmd("--db " + db() + " list --json").out);
    return list["runs"][0]["id"];
  }
};

TEST_F(CliHostile, DeleteFromAnotherFolderRemovesTheWholeRunFolder) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  fs::create_directories(m_dir / "project");
  fs::create_directories(m_dir / "elsewhere");
  const std::string id = tiny_run("runs", m_dir / "project");  // relative output.dir
  ASSERT_TRUE(fs::exists(m_dir / "project" / "runs" / id / "model.safetensors"));
  const CmdResult del = run_shell("cd " + (m_dir / "elsewhere").string() + " && " + lathe::test::cli_binary() +
                                  " --db " + db() + " delete " + id + " --yes");
  EXPECT_EQ(del.code, 0) << del.out;
  EXPECT_FALSE(fs::exists(m_dir / "project" / "runs" / id)) << del.out;  // config.json, metrics.jsonl too
  EXPECT_TRUE(fs::exists(m_dir / "project" / "runs"));
}

TEST_F(CliHostile, AnEditedStoreCannotMakeDeleteRemoveOtherFiles) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string id = tiny_run();
  const std::string victim = write("victim.txt", "precious");
  fs::create_directories(m_dir / "dir");
  const std::string victim2 = write("dir/file", "precious too");
  edit_store(db(), "UPDATE artifacts SET path = '" + victim + "' WHERE kind = 'model'");
  edit_store(db(), "INSERT INTO artifacts(run, kind, path, bytes, sha256, created_ms) SELECT run, 'x', 'runs/" + id +
                       "/../../dir/file', 12, '', 0 FROM artifacts LIMIT 1");
  const CmdResult del = run_cmd("--db " + db() + " delete " + id + " --yes");
  EXPECT_EQ(del.code, 1) << del.out;  // the run's rows are gone, but files were kept: say so
  EXPECT_NE(del.out.find("outside the run's folder"), std::string::npos) << del.out;
  EXPECT_TRUE(fs::exists(victim));
  EXPECT_TRUE(fs::exists(victim2));
  EXPECT_TRUE(fs::exists(m_dir / "dir"));
}

TEST_F(CliHostile, AnOutputDirThatCannotBeCreatedLeavesNoRunInTheStore) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string file = write("a-file", "not a folder");
  const std::string cfg = write("tiny.json", R"({"model": {"zoo": "student"}, "train": {"epochs": 1},
                                                 "data": {"train_subset": 256, "test_subset": 100}})");
  const CmdResult r = run_cmd("run " + cfg + " --db " + db() + " --set output.dir=" + file + "/runs");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("output.dir"), std::string::npos) << r.out;
  EXPECT_FALSE(store_written()) << r.out;
}

TEST_F(CliHostile, NumbersNoDoubleHoldsAreConfigErrorsNamingTheFile) {
  const std::string cfg = write("big.json", R"({"train": {"optimizer": {"lr": 1e999}}})");
  const CmdResult r = run_cmd("validate " + cfg);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("big.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1e999"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("json.exception"), std::string::npos) << r.out;
  const CmdResult s = run_cmd("validate " + write("ok.json", "{}") + " --set train.optimizer.lr=1e999");
  EXPECT_EQ(s.code, 2) << s.out;
  EXPECT_NE(s.out.find("train.optimizer.lr"), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("json.exception"), std::string::npos) << s.out;
}

TEST_F(CliHostile, InvalidUtf8InSetIsRefusedBeforeAnyRun) {
  const std::string cfg = write("ok.json", "{}");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir() + " --set \"$(printf 'name=bad\\377\\376')\"");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("UTF-8"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("type_error"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("RunWriter"), std::string::npos) << r.out;
  EXPECT_FALSE(store_written());
}

TEST_F(CliHostile, DuplicateKeysAreRefusedWithTheirPath) {
  const std::string cfg = write("dup.json", R"({"train": {"epochs": 1, "optimizer": {"lr": 0.1, "lr": 0.2}}})");
  const CmdResult r = run_cmd("validate " + cfg);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("duplicate key \"lr\" in train.optimizer"), std::string::npos) << r.out;
  const std::string top = write("dup2.json", R"({"seed": 1, "seed": 2})");
  EXPECT_NE(run_cmd("validate " + top).out.find("duplicate key \"seed\" in the top-level object"), std::string::npos);
}

TEST_F(CliHostile, LayerListsThatCannotWorkFailValidateNamingTheLayer) {
  auto validate = [&](const std::string& layers) {
    return run_cmd("validate " + write("m.json", R"({"model": {"zoo": "custom", "layers": )" + layers + "}}"));
  };
  const struct {
    const char* layers;
    const char* expected;
  } cases[] = {
      {R"([{"type": "linear", "out": 10, "name": 5}])", "model.layers[0].name"},
      {R"([{"type": "conv2d", "out": 4, "stride": 0}, {"type": "flatten"}, {"type": "linear", "out": 10}])",
       "model.layers[0].stride"},
      {R"([{"type": "flatten"}, {"type": "linear", "out": 0}])", "model.layers[1].out"},
      {R"([{"type": "maxpool2d", "kernel": 4}, {"type": "maxpool2d", "kernel": 4}, {"type": "maxpool2d", "kernel": 4},
          {"type": "flatten"}, {"type": "linear", "out": 10}])",
       "model.layers[2]: maxpool2d kernel 4 is larger than its input 1x1"},
      {R"([{"type": "flatten"}, {"type": "linear", "out": 5}])", "5 outputs, but the dataset has 10 classes"},
      {R"([{"type": "flatten"}, {"type": "linear", "out": 10, "input": ["x"]}])", "model.layers[1].input"},
  };
  for (const auto& c : cases) {
    const CmdResult r = validate(c.layers);
    EXPECT_EQ(r.code, 2) << c.layers << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << c.layers << "\n" << r.out;
    EXPECT_EQ(r.out.find(".cpp"), std::string::npos) << r.out;  // no source-file check leaks out
  }
}

TEST_F(CliHostile, ListRefusesABogusSortAndPrintsNamesSafely) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  tiny_run();
  const CmdResult bogus = run_cmd("--db " + db() + " list --sort bogus");
  EXPECT_EQ(bogus.code, 2) << bogus.out;
  EXPECT_NE(bogus.out.find("no metric 'bogus'"), std::string::npos) << bogus.out;
  EXPECT_NE(bogus.out.find("test/accuracy"), std::string::npos) << bogus.out;  // lists the known metrics
  EXPECT_EQ(run_cmd("--db " + db() + " list --sort best:test/accuracy").code, 0);

  // A name that would clear the screen and forge a table row, and a 1 MB one.
  edit_store(db(), "UPDATE runs SET name = 'evil' || char(27) || '[2J' || char(10) || 'fake-row finished'");
  const CmdResult list = run_cmd("--db " + db() + " list");
  EXPECT_EQ(list.code, 0) << list.out;
  EXPECT_EQ(list.out.find('\x1b'), std::string::npos);
  EXPECT_NE(list.out.find("evil\\x1b[2J\\x0afake-row"), std::string::npos) << list.out;
  edit_store(db(), "UPDATE runs SET name = printf('%.*c', 1000000, 'x')");
  const CmdResult huge = run_cmd("--db " + db() + " list");
  EXPECT_LT(huge.out.size(), 2000u);
  const std::string valid = write("ctl.json", "{\"name\": \"a\\u001bb\"}");
  const CmdResult refused = run_cmd("validate " + valid);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("name:"), std::string::npos) << refused.out;
}

TEST_F(CliHostile, AStoreThisUserCannotWriteCanStillBeListedAndShown) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  if (geteuid() != 0 || run_shell("command -v setpriv").code != 0)
    GTEST_SKIP() << "needs root and setpriv to run lathe-cli as another user";
  const std::string id = tiny_run();
  // The store and its folder stay root's (0644 / 0755): user nobody may read them, not write.
  fs::permissions(m_dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                             fs::perms::others_exec);
  const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups " + lathe::test::cli_binary();
  const CmdResult list = run_shell(as_nobody + " --db " + db() + " list");
  EXPECT_EQ(list.code, 0) << list.out;
  EXPECT_NE(list.out.find(id), std::string::npos) << list.out;
  const CmdResult show = run_shell(as_nobody + " --db " + db() + " show " + id + " --json");
  EXPECT_EQ(show.code, 0) << show.out;
  const CmdResult exp = run_shell(as_nobody + " --db " + db() + " export " + id + " --format csv -o /dev/null");
  EXPECT_EQ(exp.code, 0) << exp.out;
}

}  // namespace
