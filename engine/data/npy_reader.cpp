// The .npy header parser (a tiny reader for the Python dict literal NumPy writes) and the file reader.
#include "engine/data/npy_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "engine/core/error.h"

namespace lathe {
namespace {

constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
const char* const kAllowedDescr = "|u1, |i1, <u2, <i2, <u4, <i4, <u8, <i8, <f4, <f8";

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw DataError("NumPy array '" + name + "': " + what);
}

/// A cursor over the header's dict text: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class DictText {
 public:
  DictText(std::string text, std::string name) : m_text(std::move(text)), m_name(std::move(name)) {}

  void skip_space() {
    while (m_pos < m_text.size() && (m_text[m_pos] == ' ' || m_text[m_pos] == '\t' || m_text[m_pos] == '\n'))
      ++m_pos;
  }
  bool peek(char c) {
    skip_space();
    return m_pos < m_text.size() && m_text[m_pos] == c;
  }
  void expect(char c, const char* what) {
    if (!peek(c))
      fail(m_name, std::string("malformed header: expected ") + what + " at character " + std::to_string(m_pos) +
                       " of \"" + m_text + "\"");
    ++m_pos;
  }
  std::string quoted() {
    skip_space();
    if (m_pos >= m_text.size() || (m_text[m_pos] != '\'' && m_text[m_pos] != '"'))
      fail(m_name, "malformed header: expected a quoted string at character " + std::to_string(m_pos) + " of \"" +
                       m_text + "\"");
    const char quote = m_text[m_pos++];
    const size_t end = m_text.find(quote, m_pos);
    if (end == std::string::npos)
      fail(m_name, "malformed header: unterminated string in \"" + m_text + "\"");
    std::string s = m_text.substr(m_pos, end - m_pos);
    m_pos = end + 1;
    return s;
  }
  std::string word() {
    skip_space();
    const size_t begin = m_pos;
    while (m_pos < m_text.size() && std::isalnum(static_cast<unsigned char>(m_text[m_pos])))
      ++m_pos;
    return m_text.substr(begin, m_pos - begin);
  }
  /// A non-negative integer (a dimension).
  int64_t dimension() {
    const std::string digits = word();
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
      fail(m_name, "malformed header: shape entry '" + digits + "' is not a non-negative integer");
    return std::stoll(digits);
  }
  bool at_end() {
    skip_space();
    return m_pos == m_text.size();
  }
  const std::string& text() const { return m_text; }

 private:
  std::string m_text, m_name;
  size_t m_pos = 0;
};

NpyDtype parse_descr(const std::string& d, const std::string& name) {
  if (d.size() == 3 && d[0] == '>' && d.substr(1) != "u1" && d.substr(1) != "i1")
    fail(name, "descr '" + d + "' is big-endian; only little-endian arrays are read (allowed: " + kAllowedDescr +
                   "); convert with x.astype(x.dtype.newbyteorder('<'))");
  const std::string t = d.size() == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '=' || d[0] == '>') ? d.substr(1) : d;
  if (t == "u1")
    return NpyDtype::u8;
  if (t == "i1")
    return NpyDtype::s8;
  if (d.size() == 3 && d[0] == '<') {
    if (t == "u2") return NpyDtype::u16;
    if (t == "i2") return NpyDtype::s16;
    if (t == "u4") return NpyDtype::u32;
    if (t == "i4") return NpyDtype::s32;
    if (t == "u8") return NpyDtype::u64;
    if (t == "i8") return NpyDtype::s64;
    if (t == "f4") return NpyDtype::f32;
    if (t == "f8") return NpyDtype::f64;
  }
  fail(name, "unsupported descr '" + d + "'; allowed: " + kAllowedDescr);
}

template <typename T>
T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // x86-64 and aarch64 Linux are little-endian, as the data is
  return v;
}

/// Truncation toward zero, saturated at the int64 range; NaN is 0 (a plain cast of NaN, an infinity
/// or 1e30 is undefined behaviour: fuzz_npy found as_int on a NaN float element).
int64_t float_to_int(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9223372036854775808.0)  // 2^63
    return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

}  // namespace

const char* npy_dtype_name(NpyDtype t) {
  switch (t) {
    case NpyDtype::u8: return "uint8";
    case NpyDtype::s8: return "int8";
    case NpyDtype::u16: return "uint16";
    case NpyDtype::s16: return "int16";
    case NpyDtype::u32: return "uint32";
    case NpyDtype::s32: return "int32";
    case NpyDtype::u64: return "uint64";
    case NpyDtype::s64: return "int64";
    case NpyDtype::f32: return "float32";
    case NpyDtype::f64: return "float64";
  }
  return "?";
}

size_t npy_dtype_size(NpyDtype t) {
  switch (t) {
    case NpyDtype::u8:
    case NpyDtype::s8: return 1;
    case NpyDtype::u16:
    case NpyDtype::s16: return 2;
    case NpyDtype::u32:
    case NpyDtype::s32:
    case NpyDtype::f32: return 4;
    default: return 8;
  }
}

int64_t NpyHeader::count() const {
  // An empty array (a 0 anywhere) has 0 elements however large the other dimensions are: those are
  // not multiplied (fuzz_npy: (10^17, 10^17, 0) overflowed int64 before its 0 was reached).
  for (int64_t d : shape)
    if (d == 0)
      return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      throw DataError("NumPy array: shape with dimension " + std::to_string(d) + " has more than 2^63 elements");
  return n;
}

size_t npy_header_size(const uint8_t* bytes, size_t available, size_t total_bytes, const std::string& name) {
  if (available < 10 || std::memcmp(bytes, kMagic, 6) != 0)
    fail(name, "not a .npy array: it does not start with the magic string \\x93NUMPY (" +
                   std::to_string(total_bytes) + " bytes)");
  const int major = bytes[6], minor = bytes[7];
  size_t header_size = 0;
  if (major == 1) {
    header_size = 10 + (static_cast<size_t>(bytes[8]) | static_cast<size_t>(bytes[9]) << 8);
  } else if (major == 2 || major == 3) {
    if (available < kNpyPreambleBytes)
      fail(name, "truncated header: " + std::to_string(total_bytes) + " bytes");
    header_size = 12 + (static_cast<size_t>(bytes[8]) | static_cast<size_t>(bytes[9]) << 8 |
                        static_cast<size_t>(bytes[10]) << 16 | static_cast<size_t>(bytes[11]) << 24);
  } else {
    fail(name, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
                   "; allowed: 1.0, 2.0, 3.0");
  }
  if (minor != 0)
    fail(name, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
                   "; allowed: 1.0, 2.0, 3.0");
  if (header_size > total_bytes)
    fail(name, "the header claims " + std::to_string(header_size) + " bytes but the array holds only " +
                   std::to_string(total_bytes) + " (truncated)");
  return header_size;
}

NpyHeader parse_npy_header(const uint8_t* bytes, size_t header_size, size_t total_bytes, const std::string& name) {
  const size_t preamble = bytes[6] == 1 ? 10 : 12;
  DictText dict(std::string(reinterpret_cast<const char*>(bytes) + preamble, header_size - preamble), name);
  NpyHeader h;
  h.data_offset = header_size;
  bool has_descr = false, has_order = false, has_shape = false;
  dict.expect('{', "'{'");
  while (!dict.peek('}')) {
    const std::string key = dict.quoted();
    dict.expect(':', "':'");
    if (key == "descr") {
      h.dtype = parse_descr(dict.quoted(), name);
      has_descr = true;
    } else if (key == "fortran_order") {
      const std::string v = dict.word();
      if (v == "True")
        fail(name, "fortran_order is True; only C-order arrays are read (save np.ascontiguousarray(x))");
      if (v != "False")
        fail(name, "malformed header: fortran_order is '" + v + "', expected True or False");
      has_order = true;
    } else if (key == "shape") {
      dict.expect('(', "'(' opening the shape tuple");
      while (!dict.peek(')')) {
        h.shape.push_back(dict.dimension());
        if (!dict.peek(')'))
          dict.expect(',', "',' in the shape tuple");
      }
      dict.expect(')', "')'");
      has_shape = true;
    } else {
      fail(name, "malformed header: unknown key '" + key + "'; a .npy header has descr, fortran_order and shape");
    }
    if (!dict.peek('}'))
      dict.expect(',', "',' between header entries");
  }
  dict.expect('}', "'}'");
  if (!dict.at_end())
    fail(name, "malformed header: text after the closing '}' in \"" + dict.text() + "\"");
  if (!has_descr || !has_order || !has_shape)
    fail(name, std::string("malformed header: missing ") + (!has_descr ? "descr" : !has_order ? "fortran_order" : "shape"));

  // The claimed size, without overflow, against the bytes that are there.
  const size_t available = total_bytes - header_size;
  size_t need = npy_dtype_size(h.dtype);
  std::string dims;
  for (int64_t d : h.shape) {
    dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    if (d != 0 && need > std::numeric_limits<size_t>::max() / static_cast<size_t>(d))
      need = std::numeric_limits<size_t>::max();
    else
      need *= static_cast<size_t>(d);
  }
  if (need != available)
    fail(name, "shape (" + dims + ") of " + npy_dtype_name(h.dtype) + " needs " +
                   (need == std::numeric_limits<size_t>::max() ? std::string("more than 2^64") : std::to_string(need)) +
                   " bytes of data but " + std::to_string(available) + " follow the header" +
                   (need > available ? " (truncated, or the shape is wrong)" : " (trailing bytes)"));
  return h;
}

double NpyArray::as_double(int64_t i) const {
  const uint8_t* p = data.data() + static_cast<size_t>(i) * npy_dtype_size(header.dtype);
  switch (header.dtype) {
    case NpyDtype::f32: return load_le<float>(p);
    case NpyDtype::f64: return load_le<double>(p);
    default: return static_cast<double>(as_int(i));
  }
}

int64_t NpyArray::as_int(int64_t i) const {
  const uint8_t* p = data.data() + static_cast<size_t>(i) * npy_dtype_size(header.dtype);
  switch (header.dtype) {
    case NpyDtype::u8: return *p;
    case NpyDtype::s8: return static_cast<int8_t>(*p);
    case NpyDtype::u16: return load_le<uint16_t>(p);
    case NpyDtype::s16: return load_le<int16_t>(p);
    case NpyDtype::u32: return load_le<uint32_t>(p);
    case NpyDtype::s32: return load_le<int32_t>(p);
    case NpyDtype::u64: {
      const uint64_t v = load_le<uint64_t>(p);
      return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                              : static_cast<int64_t>(v);
    }
    case NpyDtype::s64: return load_le<int64_t>(p);
    case NpyDtype::f32: return float_to_int(load_le<float>(p));
    case NpyDtype::f64: return float_to_int(load_le<double>(p));
  }
  return 0;
}

bool NpyArray::is_integer() const { return header.dtype != NpyDtype::f32 && header.dtype != NpyDtype::f64; }

NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& name) {
  const size_t header_size = npy_header_size(bytes.data(), bytes.size(), bytes.size(), name);
  NpyArray a;
  a.header = parse_npy_header(bytes.data(), header_size, bytes.size(), name);
  a.file_records = a.header.shape.empty() ? 1 : a.header.shape[0];
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header_size), bytes.end());
  return a;
}

int64_t npy_records_to_read(const NpyHeader& header, int64_t max_records) {
  if (header.shape.empty())
    return 1;
  return max_records < 0 ? header.shape[0] : std::min(max_records, header.shape[0]);
}

void cut_npy_records(NpyHeader& header, int64_t records) {
  if (!header.shape.empty())
    header.shape[0] = records;
}

NpyArray read_npy(const std::string& path, int64_t max_records) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f)
    throw DataError("NumPy array '" + path + "': cannot open: " + std::strerror(errno));
  if (std::fseek(f.get(), 0, SEEK_END) != 0)
    throw DataError("NumPy array '" + path + "': cannot seek: " + std::strerror(errno));
  const long end = std::ftell(f.get());
  if (end < 0)
    throw DataError("NumPy array '" + path + "': cannot tell its size (not a regular file?)");
  std::rewind(f.get());
  const size_t total = static_cast<size_t>(end);
  uint8_t preamble[kNpyPreambleBytes] = {};
  const size_t got = std::fread(preamble, 1, std::min(total, kNpyPreambleBytes), f.get());
  const size_t header_size = npy_header_size(preamble, got, total, path);
  // The header is at most 4 GiB by its length field and no longer than the file (checked above).
  std::vector<uint8_t> header(header_size);
  std::rewind(f.get());
  if (std::fread(header.data(), 1, header_size, f.get()) != header_size)
    throw DataError("NumPy array '" + path + "': read error in the header");
  NpyArray a;
  a.header = parse_npy_header(header.data(), header_size, total, path);  // sizes checked: now allocate
  a.file_records = a.header.shape.empty() ? 1 : a.header.shape[0];
  cut_npy_records(a.header, npy_records_to_read(a.header, max_records));
  a.data.resize(a.header.data_bytes());
  if (std::fread(a.data.data(), 1, a.data.size(), f.get()) != a.data.size())
    throw DataError("NumPy array '" + path + "': read error or the file shrank while being read");
  return a;
}

std::vector<uint8_t> npy_bytes(NpyDtype dtype, const std::vector<int64_t>& shape, const std::vector<uint8_t>& data) {
  NpyHeader h;
  h.dtype = dtype;
  h.shape = shape;
  LATHE_CHECK(h.data_bytes() == data.size(), "npy_bytes: ", data.size(), " bytes for ", h.count(), " ",
              npy_dtype_name(dtype), " elements");
  static const char* const kDescr[] = {"|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f4", "<f8"};
  std::string dict = std::string("{'descr': '") + kDescr[static_cast<int>(dtype)] + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  dict += "), }";
  // NumPy pads with spaces so that the data starts on a multiple of 64 bytes, and ends with '\n'.
  while ((10 + dict.size() + 1) % 64 != 0)
    dict += ' ';
  dict += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + 6);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(dict.size() & 0xff));
  out.push_back(static_cast<uint8_t>(dict.size() >> 8));
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace lathe
