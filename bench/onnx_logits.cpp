// Lathe's side of the ONNX Runtime comparison (bench/peers/onnx_check.py): imports an ONNX file
// into Lathe, runs the Fashion-MNIST test set through it in evaluation mode, and writes the inputs
// it fed (f32 [N, C, H, W], normalised as training does) and its logits (f32 [N, K]) as raw
// little-endian files, so the peer script runs ONNX Runtime on exactly the same numbers.
// With --int8 FILE (a run's model_int8.safetensors, MODEL.onnx then the run's f32 model.onnx) the
// logits are Lathe's INT8 model's: rebuilt from the f32 weights with the file's activation
// parameters (int8_onnx.h), its s8 weights checked identical to the file's.
// With --npz FILE or --folder DIR (and --image-size S, --channels C as data.image_size/channels)
// the test set is that dataset's, normalised per channel on its training split as a run does
// (load_run_data), so the accuracy is what Lathe measures on the imported model before training.
//   onnx_logits MODEL.onnx OUT_PREFIX [--backend cpu|reference] [--data DIR] [--int8 FILE]
//               [--npz FILE | --folder DIR [--image-size S] [--channels C]]
// writes OUT_PREFIX.inputs.f32, OUT_PREFIX.logits.f32 and prints one JSON line (N, K, accuracy).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/backend/backend.h"
#include "engine/data/dataset.h"
#include "engine/data/loader.h"
#include "engine/io/onnx/onnx_import.h"
#include "engine/run/config.h"
#include "engine/run/data_setup.h"
#include "engine/run/int8_onnx.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: onnx_logits MODEL.onnx OUT_PREFIX [--backend cpu|reference] [--data DIR] [--int8 FILE]\n"
                 "                   [--npz FILE | --folder DIR [--image-size S] [--channels C]]\n");
    return 2;
  }
  std::string backend_name = "cpu", data_dir, int8_file;
  lathe::DataConfig own;  // --npz / --folder
  for (int i = 3; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "onnx_logits: %s needs a value\n", flag.c_str());
      return 2;
    }
    const std::string value = argv[i + 1];
    if (flag == "--backend") {
      backend_name = value;
    } else if (flag == "--data") {
      data_dir = value;
    } else if (flag == "--int8") {
      int8_file = value;
    } else if (flag == "--npz" || flag == "--folder") {
      own.dataset = flag == "--npz" ? lathe::DatasetKind::npz : lathe::DatasetKind::folder;
      own.path = value;
    } else if (flag == "--image-size" || flag == "--channels") {
      (flag == "--channels" ? own.channels : own.image_size) = std::stoll(value);
    } else {
      std::fprintf(stderr,
                   "onnx_logits: unknown option '%s'; allowed: --backend, --data, --int8, --npz, --folder, "
                   "--image-size, --channels\n",
                   flag.c_str());
      return 2;
    }
  }
  try {
    auto be = lathe::make_backend(backend_name);
    lathe::OnnxImport imported = lathe::import_onnx(argv[1]);
    lathe::Model& model = *imported.model;
    lathe::Rng rng(0);
    model.create_params(*be, lathe::DType::f32, rng);
    lathe::load_onnx_weights(model, *be, imported);
    std::unique_ptr<lathe::Int8Model> int8;
    bool int8_identical = false;
    if (!int8_file.empty()) {
      const lathe::SafetensorsFile file = lathe::load_safetensors(int8_file);
      lathe::Int8ModelOptions options;
      const lathe::ActivationParams acts = lathe::qdq_activation_params(file, int8_file, &options);
      int8 = std::make_unique<lathe::Int8Model>(model, *be, acts, options);
      std::map<std::string, lathe::Tensor> saved;
      for (const auto& [name, t] : file.tensors)
        saved[name] = t;
      int8_identical = true;
      for (const auto& [name, t] : int8->state_tensors())
        if (name.ends_with(".weight") && t.dtype() == lathe::DType::s8)
          int8_identical = int8_identical && saved.count(name) && saved[name].nbytes() == t.nbytes() &&
                           std::memcmp(saved[name].raw(), t.contiguous_copy().raw(), t.nbytes()) == 0;
    }
    const lathe::TrainTest data =
        own.path.empty() ? lathe::load_fashion_mnist(data_dir) : lathe::load_run_data(own);
    lathe::check_onnx_input(model, data.test.sample_shape());
    lathe::LoaderOptions opt;
    opt.batch_size = 500;
    opt.shuffle = false;
    lathe::DataLoader loader(data.test, opt);
    loader.start_epoch(0);
    std::ofstream inputs(std::string(argv[2]) + ".inputs.f32", std::ios::binary);
    std::ofstream logits(std::string(argv[2]) + ".logits.f32", std::ios::binary);
    lathe::Batch batch;
    int64_t n = 0, correct = 0, k = 0;
    lathe::LayerContext ctx{*be, false};
    while (loader.next(batch)) {
      const lathe::Tensor x = batch.images.contiguous_copy();
      inputs.write(static_cast<const char*>(x.raw()), static_cast<std::streamsize>(x.nbytes()));
      lathe::Tensor x_dev = x;
      if (!be->device().is_cpu()) {
        x_dev = be->empty(x.shape(), lathe::DType::f32);
        be->copy(x, x_dev);
      }
      const lathe::Tensor y_dev = int8 ? int8->forward(x_dev) : model.forward(ctx, x_dev);
      lathe::Tensor y = lathe::Tensor::empty(y_dev.shape(), lathe::DType::f32);
      be->copy(y_dev, y);
      y = y.contiguous_copy();
      logits.write(static_cast<const char*>(y.raw()), static_cast<std::streamsize>(y.nbytes()));
      k = y.dim(1);
      for (int64_t i = 0; i < y.dim(0); ++i) {
        int64_t best = 0;
        for (int64_t j = 1; j < k; ++j)
          if (y.get({i, j}) > y.get({i, best}))
            best = j;
        correct += best == static_cast<int64_t>(batch.labels.get({i}));
      }
      n += y.dim(0);
    }
    std::cout << nlohmann::json{{"n", n},
                                {"k", k},
                                {"accuracy", static_cast<double>(correct) / static_cast<double>(n)},
                                {"backend", be->name()},
                                {"data", own.path.empty() ? "fashion-mnist" : own.path},
                                {"normalisation", {{"mean", data.train.channel_mean}, {"std", data.train.channel_std}}},
                                {"sha256", imported.sha256},
                                {"notes", imported.notes},
                                {"int8", !int8_file.empty()},
                                {"int8_weights_identical_to_file", int8_identical}}
                     .dump()
              << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnx_logits: %s\n", e.what());
    return 1;
  }
  return 0;
}
