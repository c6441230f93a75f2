// CSR and bitmask serialization of pruned weights. Integers and floats are written in host byte
// order (little-endian on every target we build for), packed with no padding, so size == bytes.
#include "engine/backend/formats/sparse_format.h"

#include <cstring>
#include <string>

namespace lathe {

namespace {

struct MatrixView {
  int64_t rows, cols;
};

MatrixView as_matrix(const Shape& shape) {
  const int64_t n = shape_numel(shape);
  if (shape.empty())
    return {1, n};
  const int64_t rows = shape[0];
  return {rows, rows ? n / rows : 0};
}

int64_t nonzeros(const Tensor& w) {
  LATHE_CHECK(w.device().is_cpu(), "sparse_format: ", w.describe(), " is not a host tensor");
  int64_t nnz = 0;
  for (int64_t i = 0; i < w.numel(); ++i)
    nnz += w.at_flat(i) != 0.0;
  return nnz;
}

bool narrow_columns(int64_t cols) { return cols < 65536; }

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

template <class T>
T get(const std::vector<uint8_t>& in, size_t& at) {
  if (at + sizeof(T) > in.size())
    throw DataError("sparse weight: payload ends early at byte " + std::to_string(at));
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  at += sizeof(T);
  return v;
}

}  // namespace

int64_t dense_bytes(const Tensor& weight) { return weight.numel() * 4; }

int64_t csr_bytes(const Tensor& weight) {
  const MatrixView m = as_matrix(weight.shape());
  const int64_t nnz = nonzeros(weight);
  return (m.rows + 1) * 4 + nnz * (narrow_columns(m.cols) ? 2 : 4) + nnz * 4;
}

int64_t bitmask_bytes(const Tensor& weight) { return (weight.numel() + 7) / 8 + nonzeros(weight) * 4; }

SparseEncoding smallest_encoding(const Tensor& weight) {
  SparseEncoding best{SparseEncoding::dense, dense_bytes(weight)};
  const int64_t c = csr_bytes(weight), b = bitmask_bytes(weight);
  if (c < best.bytes)
    best = {SparseEncoding::csr, c};
  if (b < best.bytes)
    best = {SparseEncoding::bitmask, b};
  return best;
}

EncodedWeight encode(const Tensor& weight, SparseEncoding::Kind kind) {
  LATHE_CHECK(weight.device().is_cpu(), "sparse_format: ", weight.describe(), " is not a host tensor");
  EncodedWeight e{kind, weight.shape(), {}};
  const int64_t n = weight.numel();
  std::vector<float> values;
  switch (kind) {
    case SparseEncoding::dense:
      for (int64_t i = 0; i < n; ++i)
        put(e.bytes, static_cast<float>(weight.at_flat(i)));
      return e;
    case SparseEncoding::csr: {
      const MatrixView m = as_matrix(weight.shape());
      LATHE_CHECK(n < (int64_t{1} << 31), "sparse_format: ", weight.describe(), " is too large for s32 row pointers");
      std::vector<uint8_t> cols;
      put<int32_t>(e.bytes, 0);
      for (int64_t r = 0; r < m.rows; ++r) {
        for (int64_t c = 0; c < m.cols; ++c) {
          const double v = weight.at_flat(r * m.cols + c);
          if (v == 0.0)
            continue;
          if (narrow_columns(m.cols))
            put(cols, static_cast<uint16_t>(c));
          else
            put(cols, static_cast<int32_t>(c));
          values.push_back(static_cast<float>(v));
        }
        put(e.bytes, static_cast<int32_t>(values.size()));
      }
      e.bytes.insert(e.bytes.end(), cols.begin(), cols.end());
      break;
    }
    case SparseEncoding::bitmask: {
      e.bytes.assign((n + 7) / 8, 0);
      for (int64_t i = 0; i < n; ++i) {
        const double v = weight.at_flat(i);
        if (v == 0.0)
          continue;
        e.bytes[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
        values.push_back(static_cast<float>(v));
      }
      break;
    }
  }
  for (float v : values)
    put(e.bytes, v);
  return e;
}

Tensor decode(const EncodedWeight& e) {
  Tensor out = Tensor::zeros(e.shape, DType::f32);
  float* dst = out.data<float>();
  const int64_t n = out.numel();
  size_t at = 0;
  switch (e.kind) {
    case SparseEncoding::dense:
      for (int64_t i = 0; i < n; ++i)
        dst[i] = get<float>(e.bytes, at);
      break;
    case SparseEncoding::csr: {
      const MatrixView m = as_matrix(e.shape);
      std::vector<int32_t> row_ptr(m.rows + 1);
      for (auto& p : row_ptr)
        p = get<int32_t>(e.bytes, at);
      const int64_t nnz = row_ptr.back();
      if (row_ptr[0] != 0 || nnz < 0 || nnz > n)
        throw DataError("sparse weight (csr): bad row pointers");
      for (int64_t r = 0; r < m.rows; ++r)
        if (row_ptr[r + 1] < row_ptr[r])
          throw DataError("sparse weight (csr): row pointers decrease at row " + std::to_string(r));
      std::vector<int64_t> cols(nnz);
      for (auto& c : cols) {
        c = narrow_columns(m.cols) ? get<uint16_t>(e.bytes, at) : get<int32_t>(e.bytes, at);
        if (c < 0 || c >= m.cols)
          throw DataError("sparse weight (csr): column index " + std::to_string(c) + " outside [0, " +
                          std::to_string(m.cols) + ")");
      }
      for (int64_t r = 0; r < m.rows; ++r) {
        for (int32_t k = row_ptr[r]; k < row_ptr[r + 1]; ++k)
          dst[r * m.cols + cols[k]] = get<float>(e.bytes, at);
      }
      break;
    }
    case SparseEncoding::bitmask: {
      const size_t mask_bytes = static_cast<size_t>((n + 7) / 8);
      if (e.bytes.size() < mask_bytes)
        throw DataError("sparse weight (bitmask): payload shorter than its mask");
      at = mask_bytes;
      for (int64_t i = 0; i < n; ++i)
        if (e.bytes[i / 8] >> (i % 8) & 1u)
          dst[i] = get<float>(e.bytes, at);
      break;
    }
  }
  if (at != e.bytes.size())
    throw DataError("sparse weight: " + std::to_string(e.bytes.size() - at) + " bytes left over after decoding");
  return out;
}

}  // namespace lathe
