// Helpers for the analysis tests: a study store (prune ratio x seed, like a real sweep's runs) and
// numpy run as an independent oracle (python3 with numpy: Debian's python3-numpy).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/store/run_writer.h"
#include "tests/support/run_shell.h"

namespace lathe::test {

/// A python3 that imports numpy ("" when none): $LATHE_NUMPY_PYTHON, python3, /usr/bin/python3, then
/// the peers venv.
inline std::string numpy_python() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("LATHE_NUMPY_PYTHON"))
    candidates.push_back(env);
  candidates.push_back("python3");
  candidates.push_back("/usr/bin/python3");  // Debian's, with python3-numpy (a pyenv python3 may lack it)
  if (const char* home = std::getenv("HOME"))
    candidates.push_back(std::string(home) + "/.cache/lathe/peers-venv/bin/python");
  for (const std::string& py : candidates)
    if (run_shell(py + " -c 'import numpy' >/dev/null").code == 0)
      return py;
  return "";
}

/// A deterministic, irregular value for (ratio index, seed, step): no two runs alike.
inline double study_value(int ratio, int seed, int step) {
  const uint64_t h = (static_cast<uint64_t>(ratio) * 2654435761u + static_cast<uint64_t>(seed) * 40503u +
                      static_cast<uint64_t>(step) * 97u) %
                     1000u;
  return 0.9 - 0.1 * ratio + 0.01 * step + 0.00003 * static_cast<double>(h);  // seeds differ by up to 0.03
}

/// 3 seeds x 4 prune ratios, each with test/accuracy at steps 1..5 and model/bytes; names as a
/// sweep writes them ("cnn ratio=0.25 seed=1"). Returns the run ids in creation order.
inline std::vector<std::string> write_study(const std::string& db,
                                            const std::vector<double>& ratios = {0.25, 0.5, 0.75, 0.9}, int seeds = 3) {
  std::vector<std::string> ids;
  for (size_t r = 0; r < ratios.size(); ++r)
    for (int seed = 0; seed < seeds; ++seed) {
      RunWriter w(db);
      RunInfo info;
      info.name = "cnn ratio=" + std::to_string(ratios[r]) + " seed=" + std::to_string(seed);
      info.config = {{"name", info.name},
                     {"seed", seed},
                     {"prune", {{"method", "l1-unstructured"}, {"ratio", ratios[r]}}},
                     {"train", {{"epochs", 1}, {"batch_size", 128}}}};
      ids.push_back(w.begin_run(info));
      for (int step = 1; step <= 5; ++step)
        w.sample("test/accuracy", step, step * 10.0, study_value(static_cast<int>(r), seed, step));
      w.sample("model/bytes", 5, 60.0, 400000.0 * (1.0 - ratios[r]) + 1000.0 * seed);
      w.finish(RunStatus::finished);
    }
  return ids;
}

}  // namespace lathe::test
