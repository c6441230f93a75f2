// lathe-cli's cost commands: `cost CONFIG|RUN` (expected wall time and dollars on-demand and on spot,
// with the recommended checkpoint interval) and `prices` (the price catalog with dates and sources).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lathe::cli {

/// Adds `cost` and `prices` to `app`; `db_path` is read when a command runs (the global --db).
void add_cost_commands(CLI::App& app, const std::string& db_path, int& exit_code);

}  // namespace lathe::cli
