// lathe-cli tag / note / list --tag --search / importance on a study store: tags and notes land in
// the store and come back in list and show; a bad tag exits non-zero naming it; importance ranks
// the ratio (which drives accuracy in the study) above the seed.
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "engine/store/store.h"
#include "tests/analysis/analysis_test_util.h"

namespace lathe {
namespace {

using test::run_cmd;

class CliNotes : public test::Cli {};

TEST_F(CliNotes, TagNoteListAndSearch) {
  const std::vector<std::string> ids = test::write_study(db(), {0.25, 0.5}, 2);
  const std::string pre = "--db " + db() + " ";
  test::CmdResult r = run_cmd(pre + "tag " + ids[0] + " paper baseline");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tags: baseline,paper"), std::string::npos) << r.out;
  ASSERT_EQ(run_cmd(pre + "tag " + ids[1] + " paper").code, 0);
  ASSERT_EQ(run_cmd(pre + "note " + ids[0] + " 'dense reference, 2 epochs'").code, 0);
  r = run_cmd(pre + "tag " + ids[2] + " 'two words'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("tag 'two words'"), std::string::npos) << r.out;

  r = run_cmd(pre + "list --tag paper --json");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["total"], 2);
  r = run_cmd(pre + "list --search 'DENSE ref' --json");
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["total"], 1) << r.out;
  EXPECT_EQ(j["runs"][0]["id"], ids[0]);
  EXPECT_EQ(j["runs"][0]["note"], "dense reference, 2 epochs");
  EXPECT_EQ(j["runs"][0]["tags"], (nlohmann::json{"baseline", "paper"}));
  r = run_cmd(pre + "show " + ids[0]);
  EXPECT_NE(r.out.find("note dense reference, 2 epochs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tags baseline,paper"), std::string::npos) << r.out;
  ASSERT_EQ(run_cmd(pre + "tag --remove " + ids[0] + " paper").code, 0);
  ASSERT_EQ(run_cmd(pre + "note " + ids[0] + " ''").code, 0);
  Store s = Store::open(db(), Store::read_only_options());
  EXPECT_EQ(s.run(ids[0]).tags, (std::vector<std::string>{"baseline"}));
  EXPECT_EQ(s.run(ids[0]).note, "");
}

TEST_F(CliNotes, ImportanceRanksTheRatioFirst) {
  test::write_study(db(), {0.1, 0.3, 0.5, 0.7, 0.9}, 3);
  test::CmdResult r = run_cmd("--db " + db() + " importance --metric test/accuracy --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["runs"], 15);
  ASSERT_EQ(j["knobs"].size(), 2u) << r.out;  // prune.ratio and seed vary; name is left out
  EXPECT_EQ(j["knobs"][0]["knob"], "prune.ratio");
  EXPECT_LT(j["knobs"][0]["spearman"].get<double>(), -0.8);
  r = run_cmd("--db " + db() + " importance --metric test/accuracy");
  EXPECT_NE(r.out.find("Permutation importance of a random forest"), std::string::npos) << r.out;
  r = run_cmd("--db " + db() + " importance --metric nope");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--metric 'nope'"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace lathe
