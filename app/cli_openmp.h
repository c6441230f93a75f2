// How the OpenMP threads of a training wait between parallel regions. libgomp, unless told, spins
// ~300,000 times at every barrier before it sleeps; on a machine whose cores other processes also
// use (a laptop compiling in the background, ranks sharing cores), a waiting thread then burns the
// core its own team's late thread needs: the mlp on 1 rank x 2 threads fell from ~78,000 to ~1,400
// samples/s beside two nice-5 compile jobs on this 2-core machine. Sleeping at once
// (OMP_WAIT_POLICY=passive) costs a third of the quiet rate; a bounded spin (GOMP_SPINCOUNT=30000)
// keeps the quiet rate and more than doubles the busy one (bench/omp_wait.py). libgomp reads its
// environment when it is loaded, before main(), so lathe-cli sets it and executes itself again,
// once, for the commands that train; a policy or spin count the user set is kept.
#pragma once

namespace lathe::cli {

/// For `run` and `resume` (and so for sweeps' and data-parallel ranks' children, which inherit the
/// environment): when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, sets GOMP_SPINCOUNT to
/// the workbench's bound and re-executes /proc/self/exe with the same arguments (same pid).
/// Returns only when nothing needed doing or the re-execution failed (then nothing changes).
void settle_openmp_wait_policy(int argc, char** argv);

}  // namespace lathe::cli
