// How the OpenMP threads of a training wait between parallel regions. libgomp, unless told, spins
// ~300,000 times at every barrier before it sleeps; on a machine whose cores other processes also
// use (a laptop compiling in the background, ranks sharing cores), a waiting thread then burns the
// core its own team's late thread needs, and a 2-thread run fell from ~75,000 to ~600-1,900
// samples/s (mlp, this 2-core machine at load ~10) where OMP_WAIT_POLICY=passive kept ~14,000.
// libgomp reads its environment when it is loaded, before main(), so lathe-cli sets the policy and
// executes itself again, once, for the commands that train; a policy the user set is kept.
#pragma once

namespace lathe::cli {

/// For `run` and `resume` (and so for sweeps' and data-parallel ranks' children, which inherit the
/// environment): when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, sets OMP_WAIT_POLICY to
/// the workbench's policy and re-executes /proc/self/exe with the same arguments (same pid).
/// Returns only when nothing needed doing or the re-execution failed (then nothing changes).
void settle_openmp_wait_policy(int argc, char** argv);

}  // namespace lathe::cli
