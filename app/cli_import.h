// lathe-cli import DB|FOLDER: merges other stores into --db (engine/store/store_import.h), e.g.
// the per-task store files of a sweep submitted to Slurm. Running it again imports nothing new.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lathe::cli {

void add_import_command(CLI::App& app, const std::string& db_path, int& exit_code);

}  // namespace lathe::cli
