// lathe-cli tag / note: label runs so a study of hundreds stays findable (`list --tag/--search`,
// the run browser's filter, tooltips and reports show them).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lathe::cli {

/// Adds `tag RUN TAG...` (--remove to take tags off) and `note RUN TEXT` ("" clears it).
void add_note_commands(CLI::App& app, const std::string& db_path, int& exit_code);

}  // namespace lathe::cli
