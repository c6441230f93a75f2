// `lathe-cli export-model RUN --format onnx -o FILE [--artifact KIND]`: a recorded run's final f32
// weights (its pruned weights when it pruned, else the trained model) written as an ONNX model for
// a deployment runtime, with the graph its config describes, resized to the weights (structured
// pruning narrows layers).
#pragma once

namespace CLI {
class App;
}

#include <string>

namespace lathe::cli {

void add_export_model_command(CLI::App& app, const std::string& db, int& exit_code);

}  // namespace lathe::cli
