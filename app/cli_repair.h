// lathe-cli repair: re-imports the samples a locked store or a kill kept out of a run
// (engine/store/repair.h) and restores the status the run really ended with.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lathe::cli {

/// Adds `repair RUN [--from FILE] [--wait S] [--json]`; `db_path` is read when it runs.
void add_repair_command(CLI::App& app, const std::string& db_path, int& exit_code);

}  // namespace lathe::cli
