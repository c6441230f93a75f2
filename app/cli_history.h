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
/// priced. DataError naming the path when there is no store there: reading never creates one (a
/// typo in --db would otherwise list an empty store and leave it behind).
Store open_for_reading(const std::string& db);

/// Checks an output file before any work: DataError "OPTION PATH: ..." when it is a folder, its
/// folder does not exist, or that folder is not writable (a file there that may be written is fine).
void check_output_file(const std::string& path, const std::string& option);

}  // namespace lathe::cli
