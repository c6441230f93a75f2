// Writing pruned weights as CSR / bitmask tensors inside safetensors, and reading them back.
// The tensors are slices of sparse_format's payload, so both agree byte for byte.
#include "engine/compress/prune/sparse_model_io.h"

#include <atomic>
#include <cstring>
#include <filesystem>
#include <set>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/compress/prune/mask.h"
#include "engine/backend/formats/sparse_format.h"
#include "engine/nn/safetensors.h"

namespace lathe {

namespace {

const std::string kMetaPrefix = "lathe.sparse.";

Tensor host_copy(Backend& be, const Tensor& t) {
  if (t.device().is_cpu())
    return t;
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  be.copy(t, h);
  return h;
}

/// A tensor of `dtype` and `shape` holding payload bytes [at, at + its size).
Tensor slice_bytes(const std::vector<uint8_t>& payload, size_t& at, DType dtype, const Shape& shape) {
  Tensor t = Tensor::empty(shape, dtype);
  LATHE_CHECK(at + t.nbytes() <= payload.size(), "sparse model: payload slice past the end");
  if (t.nbytes())
    std::memcpy(t.raw(), payload.data() + at, t.nbytes());
  at += t.nbytes();
  return t;
}

void append_bytes(std::vector<uint8_t>& out, const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  out.insert(out.end(), p, p + t.nbytes());
}

std::string temp_path() {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() /
          ("lathe-sparse-size-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".safetensors"))
      .string();
}

}  // namespace

SparseSaveResult save_sparse_model(Model& model, Backend& backend, const std::string& path,
                                   const std::map<std::string, std::string>& metadata) {
  std::set<std::string> prunable;
  for (const NamedParam& np : prunable_weights(model))
    prunable.insert(np.name);
  SparseSaveResult result;
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> meta = metadata;
  auto add_dense = [&](const std::string& name, const Tensor& t) {
    tensors.emplace_back(name, host_copy(backend, t));
    result.dense_bytes += static_cast<int64_t>(t.nbytes());
  };
  for (const NamedParam& p : model.named_params()) {
    const Tensor w = host_copy(backend, p.param->value);
    const SparseEncoding enc = prunable.count(p.name) ? smallest_encoding(w) : SparseEncoding{};
    if (enc.kind == SparseEncoding::dense) {
      add_dense(p.name, w);
      continue;
    }
    result.dense_bytes += static_cast<int64_t>(w.nbytes());
    ++result.sparse_layers;
    const EncodedWeight e = encode(w, enc.kind);
    const int64_t rows = w.dim(0), cols = w.numel() / rows;
    size_t at = 0;
    if (enc.kind == SparseEncoding::csr) {
      const Tensor row_ptr = slice_bytes(e.bytes, at, DType::s32, {rows + 1});
      const int64_t nnz = row_ptr.data<int32_t>()[rows];
      const Tensor col_idx =
          cols < 65536 ? slice_bytes(e.bytes, at, DType::u8, {nnz, 2}) : slice_bytes(e.bytes, at, DType::s32, {nnz});
      tensors.emplace_back(p.name + ".csr_row_ptr", row_ptr);
      tensors.emplace_back(p.name + ".csr_col_idx", col_idx);
      tensors.emplace_back(p.name + ".csr_values", slice_bytes(e.bytes, at, DType::f32, {nnz}));
    } else {
      const int64_t mask_bytes = (w.numel() + 7) / 8;
      const int64_t nnz = (static_cast<int64_t>(e.bytes.size()) - mask_bytes) / 4;
      tensors.emplace_back(p.name + ".bitmask", slice_bytes(e.bytes, at, DType::u8, {mask_bytes}));
      tensors.emplace_back(p.name + ".bitmask_values", slice_bytes(e.bytes, at, DType::f32, {nnz}));
    }
    LATHE_CHECK(at == e.bytes.size(), "sparse model: ", p.name, " payload not fully split");
    meta[kMetaPrefix + p.name] =
        std::string(enc.kind == SparseEncoding::csr ? "csr " : "bitmask ") + nlohmann::json(w.shape()).dump();
  }
  for (const NamedBuffer& b : model.named_buffers())
    add_dense(b.name, b.buffer->value);
  const std::string target = path.empty() ? temp_path() : path;
  save_safetensors(target, tensors, meta);
  result.file_bytes = static_cast<int64_t>(std::filesystem::file_size(target));
  if (path.empty())
    std::filesystem::remove(target);
  return result;
}

void load_sparse_model_weights(Model& model, Backend& backend, const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  std::map<std::string, Tensor> by_name;
  for (auto& [name, t] : file.tensors)
    by_name[name] = t;
  std::set<std::string> used;
  auto take = [&](const std::string& name) -> const Tensor& {
    auto it = by_name.find(name);
    if (it == by_name.end())
      throw DataError(path + ": missing tensor '" + name + "'");
    used.insert(name);
    return it->second;
  };
  auto load_into = [&](const std::string& name, Tensor& dst) {
    Tensor src;
    auto meta = file.metadata.find(kMetaPrefix + name);
    if (meta == file.metadata.end()) {
      src = take(name);
    } else {
      const std::string& v = meta->second;
      const size_t space = v.find(' ');
      const std::string kind = v.substr(0, space);
      EncodedWeight e;
      try {
        e.shape = nlohmann::json::parse(v.substr(space + 1)).get<Shape>();
      } catch (const std::exception&) {
        throw DataError(path + ": metadata '" + kMetaPrefix + name + "' = '" + v + "' has no valid shape");
      }
      // Checked before decoding, so the dense tensor decode() allocates is the model's own size.
      if (e.shape != dst.shape())
        throw DataError(path + ": tensor '" + name + "' has shape " + shape_str(e.shape) + ", the model expects " +
                        shape_str(dst.shape()));
      if (kind == "csr") {
        e.kind = SparseEncoding::csr;
        for (const char* part : {".csr_row_ptr", ".csr_col_idx", ".csr_values"})
          append_bytes(e.bytes, take(name + part));
      } else if (kind == "bitmask") {
        e.kind = SparseEncoding::bitmask;
        for (const char* part : {".bitmask", ".bitmask_values"})
          append_bytes(e.bytes, take(name + part));
      } else {
        throw DataError(path + ": metadata '" + kMetaPrefix + name + "' names encoding '" + kind +
                        "'; allowed: csr, bitmask");
      }
      src = decode(e);
    }
    if (src.shape() != dst.shape())
      throw DataError(path + ": tensor '" + name + "' has shape " + shape_str(src.shape()) + ", the model expects " +
                      shape_str(dst.shape()));
    if (src.dtype() != dst.dtype()) {
      Tensor converted = Tensor::empty(dst.shape(), dst.dtype());
      for (int64_t i = 0; i < src.numel(); ++i)
        converted.set_flat(i, src.at_flat(i));
      src = converted;
    }
    backend.copy(src, dst);
  };
  for (const NamedParam& p : model.named_params())
    load_into(p.name, p.param->value);
  for (const NamedBuffer& b : model.named_buffers())
    load_into(b.name, b.buffer->value);
  for (const auto& [name, _] : by_name)
    if (!used.count(name))
      throw DataError(path + ": tensor '" + name + "' is not a parameter of this model");
}

}  // namespace lathe
