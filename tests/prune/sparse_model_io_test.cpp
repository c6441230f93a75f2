// The compressed model file: a pruned cnn stored with CSR/bitmask tensors loads back to exactly
// the same dense weights, is much smaller than the dense file, reports the size it would have
// without writing, and malformed files (unknown encoding, missing part, stray tensor) are rejected.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/backend/backend.h"
#include "engine/compress/prune/mask.h"
#include "engine/backend/formats/sparse_format.h"
#include "engine/compress/prune/sparse_model_io.h"
#include "engine/nn/model_io.h"
#include "engine/nn/safetensors.h"
#include "engine/nn/zoo.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lathe-sparse-io-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::unique_ptr<Model> cnn(Backend& be, uint64_t seed) {
  auto m = build_zoo_model("cnn");
  Rng rng(seed);
  m->create_params(be, DType::f32, rng);
  return m;
}

TEST(SparseModelIo, RoundTripGivesTheSameDenseWeightsAndRealBytes) {
  auto be = make_backend("cpu");
  auto model = cnn(*be, 1);
  apply_masks(*model, magnitude_masks(*model, 0.8, true));
  const std::string dense_path = tmp("dense.safetensors"), sparse_path = tmp("sparse.safetensors");
  const int64_t dense_bytes = save_model(*model, *be, dense_path);
  const SparseSaveResult r = save_sparse_model(*model, *be, sparse_path);
  EXPECT_EQ(r.file_bytes, static_cast<int64_t>(std::filesystem::file_size(sparse_path)));
  EXPECT_EQ(save_sparse_model(*model, *be, "").file_bytes, r.file_bytes) << "the size without writing must match";
  EXPECT_EQ(r.sparse_layers, 4);
  EXPECT_LE(r.file_bytes, dense_bytes * 35 / 100) << "80% sparse must store in <= 35% of the dense bytes";
  // The payload is the sum of each weight's smallest encoding plus the dense biases: check it
  // against sparse_format's own byte counts (the header is the only overhead).
  int64_t payload = 0;
  for (const NamedParam& np : model->named_params())
    payload += np.name.find("weight") != std::string::npos ? smallest_encoding(np.param->value).bytes
                                                           : np.param->value.numel() * 4;
  EXPECT_GE(r.file_bytes, payload);
  EXPECT_LE(r.file_bytes, payload + 4096);

  auto loaded = cnn(*be, 2);  // different initial weights
  load_sparse_model_weights(*loaded, *be, sparse_path);
  auto a = model->named_params(), b = loaded->named_params();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(test::all_close(b[i].param->value, a[i].param->value, 0, 0)) << a[i].name;
  // A plain dense file loads through the same function.
  auto from_dense = cnn(*be, 3);
  load_sparse_model_weights(*from_dense, *be, dense_path);
  EXPECT_TRUE(test::all_close(from_dense->named_params()[0].param->value, a[0].param->value, 0, 0));
  std::filesystem::remove(dense_path);
  std::filesystem::remove(sparse_path);
}

TEST(SparseModelIo, RejectsMalformedFiles) {
  auto be = make_backend("cpu");
  auto model = cnn(*be, 1);
  apply_masks(*model, magnitude_masks(*model, 0.9, true));
  const std::string path = tmp("bad.safetensors");
  save_sparse_model(*model, *be, path);
  SafetensorsFile f = load_safetensors(path);
  ASSERT_TRUE(f.metadata.count("lathe.sparse.0.weight"));

  SafetensorsFile bad_kind = f;
  bad_kind.metadata["lathe.sparse.0.weight"] = "coo [32,1,3,3]";
  save_safetensors(path, bad_kind.tensors, bad_kind.metadata);
  auto target = cnn(*be, 2);
  EXPECT_THROW(load_sparse_model_weights(*target, *be, path), DataError);

  SafetensorsFile missing = f;
  std::erase_if(missing.tensors, [](const auto& t) { return t.first.rfind("0.weight.", 0) == 0; });
  save_safetensors(path, missing.tensors, missing.metadata);
  EXPECT_THROW(load_sparse_model_weights(*target, *be, path), DataError);

  SafetensorsFile stray = f;
  stray.tensors.emplace_back("extra", Tensor::zeros({2}, DType::f32));
  save_safetensors(path, stray.tensors, stray.metadata);
  EXPECT_THROW(load_sparse_model_weights(*target, *be, path), DataError);
  std::filesystem::remove(path);
}

// Issue 11: the dense shape in a sparse weight's metadata is checked against the model before it is
// decoded (a claim of 10^12 values used to be allocated first: std::bad_alloc, not a DataError).
TEST(SparseModelIo, RejectsAHugeOrNegativeClaimedShapeBeforeDecoding) {
  auto be = make_backend("cpu");
  auto model = cnn(*be, 1);
  apply_masks(*model, magnitude_masks(*model, 0.9, true));
  const std::string path = tmp("huge-claim.safetensors");
  save_sparse_model(*model, *be, path);
  SafetensorsFile f = load_safetensors(path);
  ASSERT_TRUE(f.metadata.count("lathe.sparse.0.weight"));
  auto target = cnn(*be, 2);
  for (const char* shape : {"[1000000, 1000000]", "[-1, 9]", "[32, 1, 3]"}) {
    SafetensorsFile bad = f;
    const std::string v = bad.metadata["lathe.sparse.0.weight"];
    bad.metadata["lathe.sparse.0.weight"] = v.substr(0, v.find(' ')) + " " + shape;
    save_safetensors(path, bad.tensors, bad.metadata);
    try {
      load_sparse_model_weights(*target, *be, path);
      ADD_FAILURE() << "accepted the claimed shape " << shape;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("the model expects"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "shape " << shape << ": expected a DataError, got " << e.what();
    }
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace lathe
