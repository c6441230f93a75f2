// safetensors writer and a strict reader: every offset, shape and dtype in the header is checked
// before a byte of tensor data is trusted.
#include "engine/nn/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

namespace lathe {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

using nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we (a corrupt length field
// would otherwise make us allocate gigabytes).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// More dimensions than any tensor of ours has: a longer shape is corrupt, not a tensor.
constexpr size_t kMaxRank = 16;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {{DType::f32, "F32"}, {DType::f64, "F64"}, {DType::bf16, "BF16"},
                                     {DType::f16, "F16"}, {DType::s8, "I8"},   {DType::s32, "I32"},
                                     {DType::u8, "U8"}};

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw DataError("safetensors file " + path + ": " + what);
}

// Closes the FILE and removes the temporary file unless commit() was reached.
class TempFile {
 public:
  explicit TempFile(std::string path) : m_path(std::move(path)) { m_file = std::fopen(m_path.c_str(), "wb"); }
  ~TempFile() {
    if (m_file)
      std::fclose(m_file);
    if (!m_committed)
      std::remove(m_path.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  std::FILE* get() const { return m_file; }
  const std::string& path() const { return m_path; }
  /// Flushes to disk and renames over `target`.
  bool commit(const std::string& target) {
    if (std::fflush(m_file) != 0 || ::fsync(::fileno(m_file)) != 0)
      return false;
    const int rc = std::fclose(m_file);
    m_file = nullptr;
    if (rc != 0 || std::rename(m_path.c_str(), target.c_str()) != 0)
      return false;
    m_committed = true;
    return true;
  }

 private:
  std::string m_path;
  std::FILE* m_file = nullptr;
  bool m_committed = false;
};

uint64_t parse_uint(const json& v, const std::string& path, const std::string& where) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
    bad_file(path, where + " must be a non-negative integer, got " + v.dump());
  return v.get<uint64_t>();
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const DTypeName& d : kDTypeNames)
    if (d.dtype == dtype)
      return d.name;
  LATHE_FAIL("dtype ", dtype_name(dtype), " has no safetensors name");
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Header: metadata first, then tensors in the order given, which is also their data order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    LATHE_CHECK(!name.empty() && name != "__metadata__", "save_safetensors: bad tensor name '", name, "'");
    LATHE_CHECK(seen.insert(name).second, "save_safetensors: tensor name '", name, "' given twice");
    LATHE_CHECK(t.defined(), "save_safetensors: tensor '", name, "' is undefined");
    LATHE_CHECK(t.device().is_cpu(), "save_safetensors: tensor '", name, "' is on ", t.device().str(),
                "; copy it to the host first");
    nlohmann::ordered_json entry;
    entry["dtype"] = safetensors_dtype_name(t.dtype());
    entry["shape"] = t.shape();
    entry["data_offsets"] = {offset, offset + t.nbytes()};
    header[name] = std::move(entry);
    offset += t.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL("save_safetensors: cannot encode the header (names and metadata must be UTF-8): ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  unsigned char length[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(n >> (8 * i));

  TempFile tmp(path + ".tmp-" + std::to_string(::getpid()));
  if (!tmp.get())
    throw DataError("safetensors file " + path + ": cannot create " + tmp.path() + ": " + std::strerror(errno));
  bool ok =
      std::fwrite(length, 1, 8, tmp.get()) == 8 && std::fwrite(text.data(), 1, text.size(), tmp.get()) == text.size();
  for (const auto& [name, t] : tensors) {
    if (!ok)
      break;
    const Tensor dense = t.is_contiguous() ? t : t.contiguous_copy();
    ok = std::fwrite(dense.raw(), 1, dense.nbytes(), tmp.get()) == dense.nbytes();
  }
  if (!ok || !tmp.commit(path))
    throw DataError("safetensors file " + path + ": write failed: " + std::strerror(errno));
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec)
    bad_file(path, "cannot read it: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in)
    bad_file(path, "cannot open it");
  if (file_size < 8)
    bad_file(path, "is " + std::to_string(file_size) + " bytes, too short for the 8-byte header length");

  unsigned char length[8];
  in.read(reinterpret_cast<char*>(length), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(length[i]) << (8 * i);
  if (n < 2)
    bad_file(path, "header length " + std::to_string(n) + " is too short for a JSON object");
  if (n > kMaxHeaderBytes)
    bad_file(path, "header length " + std::to_string(n) + " is too long (limit 100 MB)");
  if (n > file_size - 8)
    bad_file(path, "header length " + std::to_string(n) + " runs past the end of the " + std::to_string(file_size) +
                       "-byte file");
  std::string text(n, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(n)))
    bad_file(path, "cannot read the header");
  if (text[0] != '{')
    bad_file(path, "header does not start with '{'");

  // Duplicate tensor names would silently shadow each other in a JSON object: reject them.
  std::string duplicate;
  std::set<std::string> keys;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text, on_event);
  } catch (const json::parse_error& e) {
    bad_file(path, std::string("header is not valid JSON: ") + e.what());
  } catch (const json::exception& e) {
    // e.g. out_of_range.406 for a number such as 1e999 that no double holds
    bad_file(path, std::string("header cannot be read as JSON (") + e.what() + ")");
  }
  if (!header.is_object())
    bad_file(path, "header is not a JSON object");
  if (!duplicate.empty())
    bad_file(path, "tensor \"" + duplicate + "\" is listed twice in the header");

  const uint64_t data_bytes = file_size - 8 - n;
  SafetensorsFile out;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
    bool i64 = false;  // stored I64 (PyTorch's BatchNorm num_batches_tracked), held as s32
  };
  std::vector<Entry> entries;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (!e.is_object())
        bad_file(path, "__metadata__ must be an object of strings");
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string())
          bad_file(path, "__metadata__." + k + " must be a string, got " + v.dump());
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor \"" + name + "\"";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      bad_file(path, where + " needs \"dtype\", \"shape\" and \"data_offsets\", got " + e.dump());
    Entry entry{name, DType::f32, {}, 0, 0};
    const json& dt = e.at("dtype");
    static constexpr DTypeName kI64{DType::s32, "I64"};
    const DTypeName* found = dt.is_string() && dt.get<std::string>() == "I64" ? &kI64 : nullptr;
    for (const DTypeName& d : kDTypeNames)
      if (dt.is_string() && dt.get<std::string>() == d.name)
        found = &d;
    if (!found)
      bad_file(path,
               where + " has unsupported dtype " + dt.dump() + "; allowed: F32, F64, BF16, F16, I8, I32, I64, U8");
    entry.dtype = found->dtype;
    entry.i64 = found == &kI64;
    const json& shape = e.at("shape");
    if (!shape.is_array())
      bad_file(path, where + ": shape must be an array, got " + shape.dump());
    if (shape.size() > kMaxRank)
      bad_file(path, where + ": shape has " + std::to_string(shape.size()) + " dimensions; at most " +
                         std::to_string(kMaxRank) + " are supported");
    // Count bytes in 128 bits so a hostile shape cannot overflow into a small number. The non-zero
    // dimensions must multiply to at most the file's size too, even when another one is 0: the
    // tensor's strides are their products and must not overflow.
    unsigned __int128 bytes = entry.i64 ? 8 : dtype_size(entry.dtype), nonzero = 1;
    for (const json& d : shape) {
      const uint64_t dim = parse_uint(d, path, where + ": shape entry");
      bytes *= dim;
      if (bytes > file_size)
        bytes = static_cast<unsigned __int128>(file_size) + 1;  // saturate
      if (dim > 0)
        nonzero *= dim;
      if (nonzero > file_size)
        bad_file(path, where + ": shape " + shape.dump() + " needs more bytes than the file has (its non-zero " +
                           "dimensions multiply to more than the file's " + std::to_string(file_size) + " bytes)");
      entry.shape.push_back(static_cast<int64_t>(dim));
    }
    const json& offs = e.at("data_offsets");
    if (!offs.is_array() || offs.size() != 2)
      bad_file(path, where + ": data_offsets must be [begin, end], got " + offs.dump());
    entry.begin = parse_uint(offs[0], path, where + ": data_offsets[0]");
    entry.end = parse_uint(offs[1], path, where + ": data_offsets[1]");
    if (entry.begin > entry.end || entry.end > data_bytes)
      bad_file(path, where + ": data_offsets " + offs.dump() + " out of range for the " + std::to_string(data_bytes) +
                         "-byte data section");
    if (bytes != entry.end - entry.begin)
      bad_file(path, where + ": shape " + shape.dump() + " of " + found->name + " needs " +
                         (bytes > file_size ? std::string("more bytes than the file has")
                                            : std::to_string(static_cast<uint64_t>(bytes)) + " bytes") +
                         ", data_offsets give " + std::to_string(entry.end - entry.begin));
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      bad_file(path,
               "tensors \"" + entries[i - 1].name + "\" and \"" + entries[i].name + "\" overlap in the data section");

  for (const Entry& entry : entries) {
    Tensor t = Tensor::empty(entry.shape, entry.dtype);
    in.seekg(static_cast<std::streamoff>(8 + n + entry.begin));
    if (entry.i64) {  // integer counters: kept as s32 when every value fits, else refused by name
      std::vector<int64_t> values(static_cast<size_t>(t.numel()));
      if (!in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(entry.end - entry.begin)))
        bad_file(path, "cannot read the data of tensor \"" + entry.name + "\"");
      for (size_t i = 0; i < values.size(); ++i) {
        if (values[i] < INT32_MIN || values[i] > INT32_MAX)
          bad_file(path, "tensor \"" + entry.name + "\" (I64) holds " + std::to_string(values[i]) +
                             ", outside the 32-bit integers Lathe keeps it in");
        t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
      }
    } else if (!in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(entry.end - entry.begin))) {
      bad_file(path, "cannot read the data of tensor \"" + entry.name + "\"");
    }
    out.tensors.emplace_back(entry.name, std::move(t));
  }
  return out;
}

}  // namespace lathe
