// Sweeps in the store: a new sweep's members are pending, each member's state follows its run's
// status (the runs table is the truth), progress counts come from the same, sweeps are found by
// id, prefix or name, ids are unique even for sweeps made in the same second, and a v5 store
// migrates to v6 keeping its runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "engine/core/error.h"
#include "engine/store/schema.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"
#include "store_test_util.h"

namespace lathe {
namespace {

using test::StoreDir;

std::vector<NewSweepMember> members(int n) {
  std::vector<NewSweepMember> out;
  for (int i = 0; i < n; ++i)
    out.push_back({"m" + std::to_string(i), {{"name", "m" + std::to_string(i)}, {"seed", i}}});
  return out;
}

std::string run_with_status(Store& s, RunStatus status) {
  RunInfo info;
  info.name = "r";
  return s.create_run(info, status);
}

TEST(SweepStore, MembersFollowTheirRuns) {
  StoreDir dir;
  Store s = Store::open(dir.db());
  const std::string id = create_sweep(s, "study", {{"definition", {{"trials", 1}}}}, members(4));
  std::vector<SweepRecord> all = list_sweeps(s);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, id);
  EXPECT_EQ(all[0].name, "study");
  EXPECT_EQ(all[0].status, "pending");
  EXPECT_EQ(all[0].total, 4);
  EXPECT_EQ(all[0].finished, 0);
  EXPECT_EQ(nlohmann::json::parse(all[0].definition_json)["definition"]["trials"], 1);

  const std::string a = run_with_status(s, RunStatus::finished);
  const std::string b = run_with_status(s, RunStatus::failed);
  const std::string c = run_with_status(s, RunStatus::running);
  set_sweep_member(s, id, 0, a, MemberState::running);  // the run's status wins over the column
  set_sweep_member(s, id, 1, b, MemberState::running);
  set_sweep_member(s, id, 2, c, MemberState::running);
  set_sweep_status(s, id, "running");
  const std::vector<SweepMemberRecord> m = sweep_members(s, id);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].state, MemberState::finished);
  EXPECT_EQ(m[1].state, MemberState::failed);
  EXPECT_EQ(m[2].state, MemberState::running);
  EXPECT_EQ(m[3].state, MemberState::pending);
  EXPECT_EQ(m[3].run_id, "");
  EXPECT_EQ(nlohmann::json::parse(m[3].config_json)["seed"], 3);
  const SweepRecord r = find_sweep(s, id);
  EXPECT_EQ(r.status, "running");
  EXPECT_EQ(r.finished, 1);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.running, 1);
  EXPECT_EQ(sweep_run_ids(s, id), (std::vector<std::string>{a, b, c}));
  run_with_status(s, RunStatus::finished);  // not a member
  RunQuery q;
  q.sweep = id;
  EXPECT_EQ(s.list_runs(q).total, 3);
  EXPECT_EQ(s.list_runs().total, 4);

  // A deleted run leaves its member pending (to be run again by a resume).
  s.delete_run(b, false);
  EXPECT_EQ(sweep_members(s, id)[1].state, MemberState::pending);
  EXPECT_THROW(set_sweep_member(s, id, 9, a, MemberState::running), DataError);
}

TEST(SweepStore, FindByPrefixOrNameAndRefuseAmbiguity) {
  StoreDir dir;
  Store s = Store::open(dir.db());
  const std::string x = create_sweep(s, "one", {}, members(1));
  const std::string y = create_sweep(s, "two", {}, members(2));
  EXPECT_EQ(find_sweep(s, "two").id, y);
  EXPECT_EQ(find_sweep(s, x).total, 1);
  s.db().exec("UPDATE sweeps SET name = 'same'");
  try {
    find_sweep(s, "same");
    FAIL() << "ambiguous name accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("matches 2 sweeps"), std::string::npos) << e.what();
  }
  EXPECT_THROW(find_sweep(s, "nope"), DataError);
  EXPECT_THROW(create_sweep(s, "empty", {}, {}), ConfigError);
  set_sweep_slurm(s, x, "4242", "/shared/x");
  EXPECT_EQ(find_sweep(s, x).slurm_job, "4242");
  EXPECT_EQ(find_sweep(s, x).status, "submitted");
}

// Sweep ids are the local time to the second and 24 random bits: two sweeps made in the same
// second must still get different ids, and a drawn id a sweep already has is drawn again.
TEST(SweepStore, SweepsMadeBackToBackGetDifferentIds) {
  StoreDir dir;
  Store s = Store::open(dir.db());
  std::set<std::string> ids;
  for (int i = 0; i < 50; ++i)  // well within a second or two
    ids.insert(create_sweep(s, "s" + std::to_string(i), {}, members(1)));
  EXPECT_EQ(ids.size(), 50u);
  EXPECT_EQ(list_sweeps(s).size(), 50u);

  // A clock and random source that repeat themselves: the clash is drawn again, not stored.
  std::vector<std::string> draws = {"20261206-120000-aaaaaa", "20261206-120000-aaaaaa", "20261206-120000-bbbbbb"};
  size_t next = 0;
  const auto repeating = [&draws, &next]() { return draws[std::min(next++, draws.size() - 1)]; };
  EXPECT_EQ(create_sweep(s, "first", {}, members(1), repeating), "20261206-120000-aaaaaa");
  EXPECT_EQ(create_sweep(s, "second", {}, members(2), repeating), "20261206-120000-bbbbbb");
  EXPECT_EQ(next, 3u);
  EXPECT_EQ(find_sweep(s, "first").total, 1);
  EXPECT_EQ(find_sweep(s, "second").total, 2);
  // Nothing but clashes: an error naming the store, and no half-made sweep.
  try {
    create_sweep(s, "third", {}, members(1), []() { return std::string("20261206-120000-aaaaaa"); });
    FAIL() << "a clashing id was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no free sweep id"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir.db()), std::string::npos) << e.what();
  }
  EXPECT_EQ(list_sweeps(s).size(), 52u);
}

TEST(SweepStore, V5StoreMigrates) {
  StoreDir dir;
  {
    sql::Db raw(dir.db());
    store_detail::configure_connection(raw);
    store_detail::migrate(raw, 5);
    raw.exec("INSERT INTO runs(rid, id, name, status, created_ms) VALUES(1, 'v5run', 'old', 'finished', 5)");
  }
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.schema_version(), 6);
  EXPECT_EQ(s.run("v5run").name, "old");
  EXPECT_TRUE(list_sweeps(s).empty());
}

}  // namespace
}  // namespace lathe
