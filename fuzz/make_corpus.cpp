// Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/): small valid files of every
// format, made by Lathe's own writers (.npz archives by the tests' zip writer, tests/support/numpy_writer.h)
// so the fuzzers start from inputs that get past the headers.
// Usage: lathe_fuzz_corpus OUT_DIR [SOURCE_DIR]   (SOURCE_DIR: for experiments/*.json; default .)
#include <sqlite3.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "engine/compress/distill/teacher_cache.h"
#include "engine/compress/prune/mask.h"
#include "engine/compress/prune/sparse_model_io.h"
#include "engine/compress/quant/int8_model.h"
#include "engine/data/idx_reader.h"
#include "engine/data/npy_reader.h"
#include "engine/nn/model_io.h"
#include "engine/nn/safetensors.h"
#include "engine/store/run_writer.h"
#include "fuzz/fuzz_util.h"
#include "tests/support/numpy_writer.h"

namespace fs = std::filesystem;
using namespace lathe;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out)
    throw Error("cannot write " + path.string());
}

fs::path folder(const fs::path& out, const std::string& target) {
  fs::create_directories(out / target);
  return out / target;
}

void idx_seeds(const fs::path& dir) {
  std::vector<uint8_t> pixels(2 * 4 * 4);
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<uint8_t>(i * 13);
  write_idx((dir / "images-idx3").string(), {2, 4, 4}, pixels);
  write_idx((dir / "images-idx3.gz").string(), {2, 4, 4}, pixels, /*gzip=*/true);
  write_idx((dir / "labels-idx1").string(), {3}, {0, 9, 4});
  write_idx((dir / "rank4-idx").string(), {1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    throw Error("cannot write " + path.string());
}

std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>(i * 37 + 5);
  return v;
}

/// .npy files: uint8 N,C,H,W images, float32 N,H,W, int64 and uint8 labels, a 0-d array; and a
/// version 2.0 header (4-byte length) written by hand.
void npy_seeds(const fs::path& dir) {
  write_bytes(dir / "u8-nchw.npy", npy_bytes(NpyDtype::u8, {2, 3, 2, 2}, ramp(24)));
  const std::vector<float> pixels = {0.f, .25f, .5f, 1.f, .75f, .125f, 0.f, 1.f};
  std::vector<uint8_t> fbytes(pixels.size() * 4);
  std::memcpy(fbytes.data(), pixels.data(), fbytes.size());
  write_bytes(dir / "f32-nhw.npy", npy_bytes(NpyDtype::f32, {2, 2, 2}, fbytes));
  std::vector<uint8_t> labels(3 * 8, 0);
  labels[8] = 4;
  labels[16] = 9;
  write_bytes(dir / "s64-labels.npy", npy_bytes(NpyDtype::s64, {3}, labels));
  write_bytes(dir / "u8-labels.npy", npy_bytes(NpyDtype::u8, {4}, {0, 1, 2, 1}));
  write_bytes(dir / "scalar.npy", npy_bytes(NpyDtype::s32, {}, {7, 0, 0, 0}));
  const std::string dict = "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 1), }\n";
  std::vector<uint8_t> v2 = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0};
  test::put32(v2, static_cast<uint32_t>(dict.size()));
  v2.insert(v2.end(), dict.begin(), dict.end());
  v2.insert(v2.end(), {1, 0, 2, 0});
  write_bytes(dir / "v2-u16.npy", v2);
}

/// .npz archives: a whole dataset (stored and deflated members), and a single deflated array.
void npz_seeds(const fs::path& dir) {
  std::vector<uint8_t> y_train(4 * 8, 0), y_test(2 * 8, 0);
  y_train[8] = 2;
  y_train[24] = 1;
  y_test[8] = 2;
  write_bytes(dir / "dataset.npz",
              test::zip_bytes({{"x_train.npy", npy_bytes(NpyDtype::u8, {4, 3, 2, 2}, ramp(48)), false},
                               {"y_train.npy", npy_bytes(NpyDtype::s64, {4}, y_train), true},
                               {"x_test.npy", npy_bytes(NpyDtype::u8, {2, 3, 2, 2}, ramp(24)), true},
                               {"y_test.npy", npy_bytes(NpyDtype::s64, {2}, y_test), false}}));
  write_bytes(dir / "deflated.npz", test::zip_bytes({{"x.npy", npy_bytes(NpyDtype::u8, {3, 4, 4}, ramp(48)), true}}));
}

void safetensors_seeds(const fs::path& dir, Model& model, Backend& be) {
  Tensor a = Tensor::zeros({2, 3}, DType::f32), b = Tensor::zeros({4}, DType::s8), c = Tensor::zeros({0, 2}, DType::u8);
  save_safetensors((dir / "three.safetensors").string(), {{"a", a}, {"b", b}, {"empty", c}}, {{"k", "v"}});
  save_model(model, be, (dir / "model.safetensors").string(), {{"lathe_model", "custom"}});
}

void teacher_cache_seed(const fs::path& dir) {
  TeacherCache cache("fuzz-key", {10, 6});
  Tensor logits = Tensor::zeros({3, 10}, DType::f32), taps = Tensor::zeros({3, 6}, DType::f32);
  for (int64_t i = 0; i < 30; ++i)
    logits.data<float>()[i] = 0.25f * static_cast<float>(i);
  cache.insert({11, 22, 33}, {&logits, &taps});
  cache.test_accuracy = 0.5;
  cache.test_samples = 3;
  cache.save((dir / "cache.bin").string());
}

void model_file_seeds(const fs::path& sparse_dir, const fs::path& int8_dir, Backend& be) {
  auto model = fuzz::tiny_model(be, 7);
  apply_masks(*model, magnitude_masks(*model, 0.8, true));
  save_sparse_model(*model, be, (sparse_dir / "pruned80.safetensors").string());
  save_model(*model, be, (sparse_dir / "dense.safetensors").string());
  auto fresh = fuzz::tiny_model(be, 8);
  Int8ModelOptions options;
  options.dynamic_activations = true;
  Int8Model int8(*fresh, be, {}, options);
  int8.save((int8_dir / "model_int8.safetensors").string());
  save_model(*fresh, be, (int8_dir / "f32.safetensors").string());
}

void config_seeds(const fs::path& dir, const fs::path& source) {
  for (const auto& entry : fs::directory_iterator(source / "experiments"))
    if (entry.path().extension() == ".json")
      fs::copy_file(entry.path(), dir / entry.path().filename(), fs::copy_options::overwrite_existing);
  write_text(dir / "custom.json",
             R"({"name": "custom", "data": {"dataset": "idx", "train_images": "a", "train_labels": "b",)"
             R"( "test_images": "c", "test_labels": "d"}, "model": {"zoo": "custom", "layers": [{"type": "conv2d",)"
             R"( "out": 4, "kernel": 3}, {"type": "relu"}, {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"},)"
             R"( {"type": "linear", "out": 10}]}, "train": {"epochs": 1}})");
  write_text(dir / "empty.json", "{}");
}

void set_seeds(const fs::path& dir) {
  write_text(dir / "lr", "train.optimizer.lr=0.05");
  write_text(dir / "several", "train.epochs=3\ntrain.batch_size=64\nmodel.zoo=cnn\nname=run 2024");
  write_text(dir / "json-values",
             "model.zoo=custom\nmodel.layers=[{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":10}]");
  write_text(dir / "strings", "data.path=/tmp/x\noutput.dir=\"runs\"\ntrain.precision=bf16");
  write_text(dir / "typo", "train.optimiser.lr=1");
}

void store_seed(const fs::path& dir) {
  const std::string path = (dir / "store.db").string();
  {
    RunWriter writer(path);
    RunInfo info;
    info.id = "seed-run";
    info.name = "seed";
    info.config = nlohmann::json{{"train", {{"epochs", 1}}}};
    writer.begin_run(info);
    for (int s = 0; s < 20; ++s)
      writer.sample("train/loss", s, s * 10.0, 1.0 / (s + 1));
    writer.event("note", {{"text", "seed"}});
    writer.finish(RunStatus::finished);
  }
  // Small pages and no WAL, so the seed is a few kilobytes in one file.
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK ||
      sqlite3_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA page_size=512; VACUUM;", nullptr, nullptr, nullptr) !=
          SQLITE_OK)
    throw Error("cannot compact " + path);
  sqlite3_close(db);
  for (const char* side : {"-wal", "-shm"})
    fs::remove(path + side);
  write_text(dir / "not-sqlite", "SQLite format 3");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: lathe_fuzz_corpus OUT_DIR [SOURCE_DIR]\n";
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path source = argc > 2 ? argv[2] : ".";
  try {
    auto be = make_backend("reference");
    auto model = fuzz::tiny_model(*be);
    idx_seeds(folder(out, "idx"));
    npy_seeds(folder(out, "npy"));
    npz_seeds(folder(out, "npz"));
    safetensors_seeds(folder(out, "safetensors"), *model, *be);
    teacher_cache_seed(folder(out, "teacher_cache"));
    model_file_seeds(folder(out, "sparse_model"), folder(out, "int8_model"), *be);
    config_seeds(folder(out, "config"), source);
    set_seeds(folder(out, "set"));
    store_seed(folder(out, "store"));
  } catch (const std::exception& e) {
    std::cerr << "lathe_fuzz_corpus: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
