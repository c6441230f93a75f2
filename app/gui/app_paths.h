// Where the desktop app finds its neighbours: lathe-cli (next to the lathe binary, as the build
// and an install lay them out), the experiments/ presets and the default run store.
#pragma once

#include <QString>

namespace lathe::app {

/// $LATHE_CLI, else lathe-cli beside this binary or one folder up (build/app/gui/lathe ->
/// build/app/lathe-cli), else lathe-cli on PATH; "" when none is found.
QString findLatheCli();
/// $LATHE_EXPERIMENTS_DIR, else the nearest experiments/ folder above this binary, else the
/// source tree's; "" when none is found.
QString findExperimentsDir();
/// The store lathe-cli uses by default ($XDG_DATA_HOME/lathe/lathe.db or ~/.local/share/...).
QString defaultStorePath();

}  // namespace lathe::app
