// lathe-cli's history commands over the run store: list, show, compare, export, delete.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace lathe::cli {

/// Adds the subcommands to `app`; each returns its exit code through the callback it installs.
/// `db_path` is read when a command runs (the global --db option).
void add_history_commands(CLI::App& app, const std::string& db_path, int& exit_code);

}  // namespace lathe::cli
