// Notes and tags (schema v5): set, read back with the run and in list_runs, filtered by tag and
// searched (id, name, note, tag; case-insensitive substring, % and _ literal); bad tags refused
// naming the tag and what is allowed; a v4 store migrates with its runs kept; delete drops tags.
#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/store/run_writer.h"
#include "engine/store/schema.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "store_test_util.h"

namespace lathe {
namespace {

using test::StoreDir;

std::string add_run(const std::string& db, const std::string& name) {
  RunWriter w(db);
  RunInfo info;
  info.name = name;
  info.config = {{"name", name}};
  const std::string id = w.begin_run(info);
  w.sample("m", 1, 0, 1.0);
  w.finish(RunStatus::finished);
  return id;
}

std::vector<std::string> names(const RunPage& p) {
  std::vector<std::string> out;
  for (const RunListItem& r : p.runs)
    out.push_back(r.run.name);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(StoreNotes, SetReadFilterAndSearch) {
  StoreDir dir;
  const std::string a = add_run(dir.db(), "alpha"), b = add_run(dir.db(), "beta"), c = add_run(dir.db(), "gamma");
  Store s = Store::open(dir.db());
  s.set_note(a, "Baseline, 50% sparsity");
  s.add_tags(a, {"baseline", "paper"});
  s.add_tags(b, {"paper", "paper"});  // once
  s.add_tags(c, {"ablation"});
  s.remove_tags(c, {"ablation", "never-there"});
  EXPECT_EQ(s.run(a).note, "Baseline, 50% sparsity");
  EXPECT_EQ(s.run(a).tags, (std::vector<std::string>{"baseline", "paper"}));
  EXPECT_EQ(s.run(b).tags, (std::vector<std::string>{"paper"}));
  EXPECT_TRUE(s.run(c).tags.empty());
  EXPECT_EQ(s.all_tags(), (std::vector<std::pair<std::string, int64_t>>{{"baseline", 1}, {"paper", 2}}));

  RunQuery q;
  q.tags = {"paper"};
  EXPECT_EQ(names(s.list_runs(q)), (std::vector<std::string>{"alpha", "beta"}));
  q.tags = {"paper", "baseline"};
  const RunPage both = s.list_runs(q);
  EXPECT_EQ(names(both), (std::vector<std::string>{"alpha"}));
  EXPECT_EQ(both.total, 1);
  EXPECT_EQ(both.runs[0].run.note, "Baseline, 50% sparsity");  // list rows carry note and tags
  EXPECT_EQ(both.runs[0].run.tags.size(), 2u);
  q = {};
  q.search = "BASELINE";  // note and tag, any case
  EXPECT_EQ(names(s.list_runs(q)), (std::vector<std::string>{"alpha"}));
  q.search = "amm";  // name
  EXPECT_EQ(names(s.list_runs(q)), (std::vector<std::string>{"gamma"}));
  q.search = "50%";  // literal %, not a wildcard
  EXPECT_EQ(names(s.list_runs(q)), (std::vector<std::string>{"alpha"}));
  q.search = "5_%";
  EXPECT_TRUE(s.list_runs(q).runs.empty());
  s.set_note(a, "");
  EXPECT_EQ(s.run(a).note, "");
}

TEST(StoreNotes, BadTagsAreRefusedNamingTheTag) {
  StoreDir dir;
  const std::string a = add_run(dir.db(), "alpha");
  Store s = Store::open(dir.db());
  for (const std::string bad : {std::string(""), std::string("two words"), std::string("a,b"), std::string(65, 'x')}) {
    try {
      s.add_tags(a, {"ok", bad});
      FAIL() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("tag '" + bad + "'"), std::string::npos) << m;
      EXPECT_NE(m.find("allowed: 1 to 64 characters"), std::string::npos) << m;
    }
  }
  EXPECT_TRUE(s.run(a).tags.empty()) << "nothing is added when one tag is bad";
  EXPECT_THROW(s.add_tags("no-such-run", {"x"}), DataError);
}

TEST(StoreNotes, V4StoreMigratesAndDeleteDropsTags) {
  StoreDir dir;
  {
    sql::Db raw(dir.db());
    store_detail::configure_connection(raw);
    store_detail::migrate(raw, 4);
    raw.exec("INSERT INTO runs(rid, id, name, status, created_ms) VALUES(3, 'v4run', 'old', 'finished', 5)");
  }
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.schema_version(), store_detail::kSchemaVersion);
  EXPECT_EQ(s.run("v4run").note, "");
  s.add_tags("v4run", {"kept"});
  EXPECT_EQ(s.run("v4run").tags, (std::vector<std::string>{"kept"}));
  s.delete_run("v4run", false);
  EXPECT_EQ(s.db().query_int("SELECT count(*) FROM run_tags"), 0);
}

}  // namespace
}  // namespace lathe
