// settle_openmp_wait_policy (see cli_openmp.h).
#include "app/cli_openmp.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace lathe::cli {

namespace {

// Spin 30,000 times (not libgomp's 300,000), then sleep. Measured with bench/omp_wait.py-style runs
// of the mlp on 1 rank x 2 threads, this 2-core machine: quiet, 78,550 samples/s against 78,461 for
// the default (passive, which sleeps at once: 51,734); beside 2 spinning processes, 26,720 against
// 11,129 (passive 22,547).
constexpr const char* kSpinCount = "30000";

bool trains(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "run") == 0 || std::strcmp(argv[i], "resume") == 0)
      return true;
  return false;
}

}  // namespace

void settle_openmp_wait_policy(int argc, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") || !trains(argc, argv))
    return;
  if (setenv("GOMP_SPINCOUNT", kSpinCount, 1) != 0)
    return;
  ::execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT");  // not re-executed: the loaded runtime keeps its own spin count
}

}  // namespace lathe::cli
