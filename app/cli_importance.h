// lathe-cli importance: which knobs drive a metric over a set of runs (engine/analysis/importance.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lathe::cli {

/// Adds `importance --metric M [RUNS...] [--name GLOB] [--tag T] [--stat last|best] [--json]`.
void add_importance_command(CLI::App& app, const std::string& db_path, int& exit_code);

}  // namespace lathe::cli
