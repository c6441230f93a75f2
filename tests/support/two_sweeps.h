// A store holding two stored sweeps and a run outside them: the set-up of the tests that filter the
// run table or the parallel coordinates to one sweep (tests/gui/sweep_test.cpp,
// tests/gui/parallel_coords_test.cpp).
#pragma once

#include <string>
#include <vector>

#include "engine/store/store.h"
#include "engine/store/sweep_store.h"
#include "tests/support/synthetic_run.h"

namespace lathe::test {

struct TwoSweeps {
  std::string a, b;                 ///< the sweep ids of "study-a" and "study-b"
  std::vector<std::string> a_runs;  ///< study-a's run ids, in member order
};

/// Writes to store `db`: sweep "study-a" of three finished runs "study-a seed=<i>" (config seed i,
/// prune.ratio 0.1 i; test/accuracy 0.5 + 0.1 i), sweep "study-b" of two "study-b seed=<i>" (seed
/// i; test/accuracy 0.3), and a run "plain" in neither (seed 9; 0.9): six runs in all.
inline TwoSweeps write_two_sweeps(const std::string& db) {
  TwoSweeps out;
  {
    Store s = Store::open(db);
    std::vector<NewSweepMember> am, bm;
    for (int i = 0; i < 3; ++i)
      am.push_back({"study-a seed=" + std::to_string(i), {{"seed", i}}});
    for (int i = 0; i < 2; ++i)
      bm.push_back({"study-b seed=" + std::to_string(i), {{"seed", i}}});
    out.a = create_sweep(s, "study-a", {}, am);
    out.b = create_sweep(s, "study-b", {}, bm);
    for (int i = 0; i < 3; ++i) {
      out.a_runs.push_back(write_run(db, am[i].name, {{"seed", i}, {"prune", {{"ratio", 0.1 * i}}}},
                                     {{"test/accuracy", {0.5 + 0.1 * i}}}));
      set_sweep_member(s, out.a, i, out.a_runs.back(), MemberState::finished);
    }
    for (int i = 0; i < 2; ++i)
      set_sweep_member(s, out.b, i, write_run(db, bm[i].name, {{"seed", i}}, {{"test/accuracy", {0.3}}}),
                       MemberState::finished);
  }
  write_run(db, "plain", {{"seed", 9}}, {{"test/accuracy", {0.9}}});
  return out;
}

}  // namespace lathe::test
