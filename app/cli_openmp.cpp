// settle_openmp_wait_policy (see cli_openmp.h).
#include "app/cli_openmp.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace lathe::cli {

namespace {

// Sleep at once instead of spinning (bench/omp_wait.py measures both, quiet and busy).
constexpr const char* kPolicy = "passive";

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
  if (setenv("OMP_WAIT_POLICY", kPolicy, 1) != 0)
    return;
  ::execv("/proc/self/exe", argv);
  unsetenv("OMP_WAIT_POLICY");  // not re-executed: the loaded runtime keeps its own policy
}

}  // namespace lathe::cli
