// lathe-cli's history commands over the run store: list, show, compare, export, delete.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "engine/store/store.h"

namespace lathe::cli {

/// Adds the subcommands to `app`; each returns its exit code through the callback it installs.
/// `db_path` is read when a command runs (the global --db option).
void add_history_commands(CLI::App& app, const std::string& db_path, int& exit_code);

/// The store for a command that only reads: opened normally (which also migrates it and marks dead
/// runs interrupted) when this process may write it, else read-only, so a store on a read-only
/// mount or owned by another user can still be listed, shown, compared, exported, reported and
/// priced.
Store open_for_reading(const std::string& db);

}  // namespace lathe::cli
