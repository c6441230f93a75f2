// The PyTorch peer scripts (bench/peers/) print their result as JSON on stdout, which the benches
// read (byod_resnet.sh, onnx_exports.sh): nothing else may reach stdout. Runs with the peers venv
// (bench/peers/setup-venv.sh: $LATHE_PEERS_VENV or ~/.cache/lathe/peers-venv) and Fashion-MNIST;
// skips without them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "tests/support/run_shell.h"

namespace lathe {
namespace {

/// The peers venv's python when it imports `modules` ("" otherwise).
std::string peers_python(const std::string& modules) {
  std::string venv;
  if (const char* env = std::getenv("LATHE_PEERS_VENV"))
    venv = env;
  else if (const char* home = std::getenv("HOME"))
    venv = std::string(home) + "/.cache/lathe/peers-venv";
  const std::string py = venv + "/bin/python";
  if (venv.empty() || test::run_shell(py + " -c 'import " + modules + "' >/dev/null").code != 0)
    return "";
  return py;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// torch.onnx.export prints its progress ("[torch.onnx] Run decompositions...") on stdout; the
// script sends it to stderr, so stdout is its one JSON line.
TEST(PeerScripts, TorchResnetOnnxPrintsOnlyItsJsonLineOnStdout) {
  if (!std::filesystem::exists(default_fashion_mnist_dir() + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string py = peers_python("torch, onnx, onnxscript");
  if (py.empty())
    GTEST_SKIP() << "no peers venv with torch, onnx and onnxscript (bench/peers/setup-venv.sh)";
  const auto dir = std::filesystem::temp_directory_path() / ("lathe-peer-scripts-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string script = std::string(LATHE_SOURCE_DIR) + "/bench/peers/torch_resnet_onnx.py";
  const test::CmdResult r =
      test::run_shell("{ " + py + " " + script + " --out " + (dir / "resnet.onnx").string() +
                      " --epochs 1 --train-subset 256 --threads 1 2>" + (dir / "stderr.txt").string() + "; }");
  const std::string err = read_file(dir / "stderr.txt");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.code, 0) << r.out << err;
  std::vector<std::string> lines;
  std::stringstream out(r.out);
  for (std::string line; std::getline(out, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 1u) << "stdout:\n" << r.out;
  const nlohmann::json j = nlohmann::json::parse(lines[0]);
  EXPECT_GT(j.at("ops").at("Conv").get<int>(), 0) << lines[0];
  EXPECT_NE(err.find("[torch.onnx]"), std::string::npos) << "the exporter's progress belongs on stderr:\n" << err;
}

}  // namespace
}  // namespace lathe
