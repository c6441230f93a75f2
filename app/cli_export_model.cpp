// export-model: a run's weights artifact -> ONNX file (f32, or INT8 as QDQ), through the engine's
// export_run_model (engine/store/model_export.h), which the desktop app's Export model calls too.
#include "app/cli_export_model.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "app/cli_history.h"
#include "engine/core/error.h"
#include "engine/store/model_export.h"

namespace lathe::cli {

namespace {

int cmd_export_model(const std::string& db, const std::string& ref, const std::string& format, const std::string& out,
                     const std::string& artifact_kind) {
  if (format != "onnx")  // before opening the store: a bad option is refused whatever the run
    throw ConfigError("--format: \"" + format + "\" is not supported; allowed: onnx");
  check_output_file(out, "-o");
  Store store = open_for_reading(db);
  const std::string id = store.resolve_run(ref);
  std::cout << export_run_model(store, id, artifact_kind, out, format).summary << "\n";
  return 0;
}

std::string kinds_text() {
  std::string s;
  for (const std::string& k : f32_export_kinds())
    s += (s.empty() ? "" : ", ") + k;
  return s;
}

}  // namespace

void add_export_model_command(CLI::App& app, const std::string& db, int& exit_code) {
  static std::string ref, format = "onnx", out, artifact;
  CLI::App* cmd = app.add_subcommand("export-model", "Write a run's final model for a deployment runtime (ONNX)");
  cmd->add_option("run", ref, "Run id, id prefix or name")->required();
  cmd->add_option("--format", format, "Output format (onnx)")->capture_default_str();
  cmd->add_option("-o,--output", out, "The file to write")->required();
  cmd->add_option("--artifact", artifact,
                  "Which weights: " + kinds_text() +
                      ", model-int8 (QDQ) (default: model-int8 on a quantizing run, else the run's last)");
  cmd->callback([&] { exit_code = cmd_export_model(db, ref, format, out, artifact); });
}

}  // namespace lathe::cli
