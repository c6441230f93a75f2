// TeacherCache: in-memory map from image hash (XXH64) to the teacher's outputs, with a simple binary
// file ("LTCACHE2", key, sizes, accuracy, records of hash + f32 values; "LTCACHE1" files held
// byte-wise FNV-1a hashes and are rebuilt).
#include "engine/compress/distill/teacher_cache.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/core/file_write.h"

namespace lathe {

namespace {
constexpr char kMagic[8] = {'L', 'T', 'C', 'A', 'C', 'H', 'E', '2'};
constexpr char kMagicV1[8] = {'L', 'T', 'C', 'A', 'C', 'H', 'E', '1'};

// XXH64 (Yann Collet's xxHash, 64-bit, https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md).
constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full, kP3 = 0x165667B19E3779F9ull,
                   kP4 = 0x85EBCA77C2B2AE63ull, kP5 = 0x27D4EB2F165667C5ull;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts (the cache file is little-endian too)
}
uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t xxh_round(uint64_t acc, uint64_t input) { return rotl(acc + input * kP2, 31) * kP1; }
uint64_t xxh_merge(uint64_t acc, uint64_t v) { return (acc ^ xxh_round(0, v)) * kP1 + kP4; }

template <class T>
void put(FileWriter& out, const T& v) {
  out.write(std::string_view(reinterpret_cast<const char*>(&v), sizeof(T)));
}
template <class T>
bool get(std::ifstream& in, T& v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&v), sizeof(T)));
}
}  // namespace

TeacherCache::TeacherCache(std::string key, std::vector<int64_t> record_sizes)
    : m_key(std::move(key)), m_sizes(std::move(record_sizes)) {
  for (int64_t s : m_sizes)
    m_record += s;
}

uint64_t TeacherCache::hash_image(const Tensor& images, int64_t row) {
  LATHE_CHECK(images.device().is_cpu() && images.is_contiguous(),
              "teacher cache: images must be a contiguous host batch");
  const int64_t bytes = static_cast<int64_t>(images.nbytes()) / images.dim(0);
  return xxh64(static_cast<const unsigned char*>(images.raw()) + row * bytes, static_cast<size_t>(bytes));
}

uint64_t TeacherCache::xxh64(const unsigned char* p, size_t len, uint64_t seed) {
  const unsigned char* const end = p + len;
  uint64_t h;
  if (len >= 32) {
    // Four independent lanes over 32-byte stripes: the multiplies overlap, unlike FNV-1a's one
    // multiply per byte in a chain (which cost as much as the student's whole step, every step).
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    for (; p + 32 <= end; p += 32) {
      v1 = xxh_round(v1, read64(p));
      v2 = xxh_round(v2, read64(p + 8));
      v3 = xxh_round(v3, read64(p + 16));
      v4 = xxh_round(v4, read64(p + 24));
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = xxh_merge(h, v1);
    h = xxh_merge(h, v2);
    h = xxh_merge(h, v3);
    h = xxh_merge(h, v4);
  } else {
    h = seed + kP5;
  }
  h += static_cast<uint64_t>(len);
  for (; p + 8 <= end; p += 8)
    h = rotl(h ^ xxh_round(0, read64(p)), 27) * kP1 + kP4;
  if (p + 4 <= end) {
    h = rotl(h ^ (static_cast<uint64_t>(read32(p)) * kP1), 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p)
    h = rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

bool TeacherCache::lookup(const std::vector<uint64_t>& hashes, std::vector<Tensor>& outs) const {
  std::vector<int64_t> recs(hashes.size());
  for (size_t i = 0; i < hashes.size(); ++i) {
    auto it = m_index.find(hashes[i]);
    if (it == m_index.end())
      return false;
    recs[i] = it->second;
  }
  LATHE_CHECK(outs.size() == m_sizes.size(), "teacher cache: ", outs.size(), " outputs asked, ", m_sizes.size(),
              " stored");
  int64_t offset = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    Tensor& t = outs[k];
    LATHE_CHECK(
        t.device().is_cpu() && t.is_contiguous() && t.dtype() == DType::f32 && t.numel() == m_sizes[k] * t.dim(0),
        "teacher cache: output ", k, " ", t.describe(), " must be a contiguous f32 host tensor of ", m_sizes[k],
        " values per sample");
    float* dst = t.data<float>();
    for (size_t i = 0; i < recs.size(); ++i)
      std::memcpy(dst + i * m_sizes[k], &m_data[recs[i] * m_record + offset], m_sizes[k] * sizeof(float));
    offset += m_sizes[k];
  }
  return true;
}

void TeacherCache::insert(const std::vector<uint64_t>& hashes, const std::vector<const Tensor*>& outs) {
  LATHE_CHECK(outs.size() == m_sizes.size(), "teacher cache: ", outs.size(), " outputs given, ", m_sizes.size(),
              " expected");
  std::vector<Tensor> flat;
  for (size_t k = 0; k < outs.size(); ++k) {
    LATHE_CHECK(outs[k]->device().is_cpu() && outs[k]->numel() == m_sizes[k] * static_cast<int64_t>(hashes.size()),
                "teacher cache: output ", k, " ", outs[k]->describe(), " does not hold ", m_sizes[k], " values x ",
                hashes.size(), " samples on the host");
    flat.push_back(outs[k]->contiguous_copy());
  }
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (m_index.count(hashes[i]))
      continue;
    const int64_t rec = static_cast<int64_t>(m_index.size());
    m_index[hashes[i]] = rec;
    m_data.resize((rec + 1) * m_record);
    int64_t offset = 0;
    for (size_t k = 0; k < flat.size(); ++k) {
      for (int64_t e = 0; e < m_sizes[k]; ++e)
        m_data[rec * m_record + offset + e] = static_cast<float>(flat[k].at_flat(i * m_sizes[k] + e));
      offset += m_sizes[k];
    }
    m_dirty = true;
  }
}

bool TeacherCache::load(const std::string& path) {
  m_load_note.clear();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return false;
  auto ignore = [&](const std::string& why) {
    m_load_note = path + " ignored (" + why + "); it is rebuilt";
    return false;
  };
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec)
    return ignore("cannot read its size: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return ignore("cannot open it");
  char magic[8];
  uint64_t key_len = 0, nsizes = 0, count = 0;
  if (in.read(magic, 8) && std::memcmp(magic, kMagicV1, 8) == 0)
    return ignore("written by an older Lathe, whose image hashes were FNV-1a");
  if (!in || std::memcmp(magic, kMagic, 8) != 0)
    return ignore("not a teacher cache file");
  if (!get(in, key_len) || key_len > std::min<uint64_t>(1u << 20, file_size))
    return ignore("bad key length");
  std::string key(key_len, '\0');
  if (!in.read(key.data(), static_cast<std::streamsize>(key_len)))
    return ignore("truncated key");
  if (key != m_key)
    return ignore("made for another teacher or backend");
  if (!get(in, nsizes) || nsizes != m_sizes.size())
    return ignore("made for other tapped outputs");
  for (int64_t s : m_sizes) {
    int64_t v = 0;
    if (!get(in, v) || v != s)
      return ignore("made for other tapped outputs");
  }
  double acc = -1;
  int64_t acc_n = 0;
  if (!get(in, acc) || !get(in, acc_n) || !get(in, count))
    return ignore("truncated header");
  // The record count is checked against what the file really holds before anything is allocated:
  // count x record bytes must be exactly the rest of the file (division, so nothing can wrap).
  const uint64_t header_bytes = static_cast<uint64_t>(in.tellg());
  const uint64_t record_bytes = 8 + static_cast<uint64_t>(m_record) * sizeof(float);
  const uint64_t rest = file_size >= header_bytes ? file_size - header_bytes : 0;
  if (count > rest / record_bytes || count * record_bytes != rest)
    return ignore("it claims " + std::to_string(count) + " records of " + std::to_string(record_bytes) + " bytes but " +
                  std::to_string(rest) + " bytes follow its header");
  std::vector<float> data(static_cast<size_t>(count * m_record));
  std::unordered_map<uint64_t, int64_t> index;
  for (uint64_t r = 0; r < count; ++r) {
    uint64_t h = 0;
    if (!get(in, h) || !in.read(reinterpret_cast<char*>(data.data() + r * m_record),
                                static_cast<std::streamsize>(m_record * sizeof(float))))
      return ignore("truncated records");
    index[h] = static_cast<int64_t>(r);
  }
  m_data = std::move(data);
  m_index = std::move(index);
  test_accuracy = acc;
  test_samples = acc_n;
  m_dirty = false;
  return true;
}

void TeacherCache::save(const std::string& path) {
  // Checked writes (a full disk is an error naming the file), then an atomic rename: a reader
  // never sees half a cache.
  const std::string tmp = path + ".tmp";
  try {
    FileWriter out(tmp, FileWriter::Mode::truncate, path);
    out.write(std::string_view(kMagic, 8));
    put<uint64_t>(out, m_key.size());
    out.write(m_key);
    put<uint64_t>(out, m_sizes.size());
    for (int64_t s : m_sizes)
      put(out, s);
    put(out, test_accuracy);
    put(out, test_samples);
    put<uint64_t>(out, m_index.size());
    std::vector<uint64_t> hash_of(m_index.size());
    for (const auto& [h, r] : m_index)
      hash_of[r] = h;
    for (size_t r = 0; r < hash_of.size(); ++r) {
      put(out, hash_of[r]);
      out.write(std::string_view(reinterpret_cast<const char*>(&m_data[r * m_record]), m_record * sizeof(float)));
    }
    out.close(/*fsync=*/true);
  } catch (const Error& e) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw DataError(std::string("distill.teacher_cache: ") + e.what());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw DataError("distill.teacher_cache: cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
  m_dirty = false;
}

}  // namespace lathe
