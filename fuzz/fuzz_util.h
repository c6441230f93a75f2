// Shared by the libFuzzer targets: the input written to a file (the readers take paths), the rule
// that a reader may reject bad bytes only with a lathe::Error (anything else escaping, a crash, a
// sanitizer report or a leak is a finding), and the tiny model the model-file targets load into.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/model.h"
#include "engine/nn/relu.h"

namespace lathe::fuzz {

/// A per-process scratch folder (removed by nobody: it holds one small file per target).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d =
        std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("lathe-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

/// Writes the input to scratch_dir()/name and returns the path (the same path on every call).
inline std::string input_file(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = (scratch_dir() / name).string();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort();
  if (size && std::fwrite(data, 1, size, f) != size)
    std::abort();
  std::fclose(f);
  return path;
}

/// Runs `f`; a lathe::Error (ConfigError, DataError, ...) is the expected way to refuse bad input.
template <class F>
void refuse_only_with_lathe_errors(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

/// The model the model-file targets load into: [1, 4, 4] -> flatten -> linear 16x8 -> relu -> linear 8x4.
inline std::unique_ptr<Model> tiny_model(Backend& be, uint64_t seed = 1) {
  auto m = std::make_unique<Model>(Shape{1, 4, 4});
  m->add("0", std::make_unique<Flatten>());
  m->add("1", std::make_unique<Linear>(16, 8));
  m->add("2", std::make_unique<ReLU>());
  m->add("3", std::make_unique<Linear>(8, 4));
  Rng rng(seed);
  m->create_params(be, DType::f32, rng);
  return m;
}

}  // namespace lathe::fuzz
