// lathe-cli run sets OMP_WAIT_POLICY=passive for its training (app/cli_openmp.h) unless the user
// chose a policy or a spin count, and the run's started event says which policy it ran under.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_test_util.h"
#include "engine/data/dataset.h"
#include "engine/store/store.h"

using namespace lathe::test;

TEST_F(Cli, TrainingRunsUnderPassiveOpenMpWaitUnlessTheUserChose) {
  if (!std::filesystem::exists(lathe::default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("tiny.json", R"({"model": {"zoo": "student"}, "train": {"epochs": 1, "threads": 2},
                                                 "data": {"train_subset": 256, "test_subset": 100}})");
  const struct {
    const char* env;  // the variables the run starts with
    const char* name;
    const char* expected;
  } cases[] = {
      {"", "unset", "passive"},
      {"OMP_WAIT_POLICY=active", "active", "active"},
      {"GOMP_SPINCOUNT=1000", "spins", "default, GOMP_SPINCOUNT=1000"},
  };
  for (const auto& c : cases) {
    const CmdResult r = run_shell(std::string("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT ") + c.env + " " + cli_binary() +
                                  " run " + cfg + " --set name=" + c.name + " " + out_dir());
    ASSERT_EQ(r.code, 0) << r.out;
  }
  lathe::Store store = lathe::Store::open(db(), lathe::Store::read_only_options());
  for (const auto& c : cases) {
    std::string policy = "(no started event)";
    for (const lathe::EventRecord& e : store.events(store.resolve_run(c.name)))
      if (e.kind == "started")
        policy = e.fields.value("omp_wait_policy", std::string("(missing)"));
    EXPECT_EQ(policy, c.expected) << c.name;
  }
}
