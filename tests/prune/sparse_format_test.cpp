// Sparse weight formats: hand-computed CSR / bitmask / dense sizes and bytes for small matrices,
// the u16 -> s32 column index switch at 65536 columns, lossless round trips whose payload is exactly
// the computed size, and malformed payloads rejected.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/backend/formats/sparse_format.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

Tensor matrix(const Shape& shape, const std::vector<double>& v) {
  Tensor t = Tensor::empty(shape, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set_flat(i, v[i]);
  return t;
}

/// [[0, 1.5, 0, 0], [0, 0, 0, 0], [-2, 0, 0, 3.25]]: 3 nonzeros of 12.
Tensor small() { return matrix({3, 4}, {0, 1.5, 0, 0, 0, 0, 0, 0, -2, 0, 0, 3.25}); }

template <class T>
std::vector<uint8_t> bytes_of(std::initializer_list<T> v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  size_t at = 0;
  for (T x : v) {
    std::memcpy(out.data() + at, &x, sizeof(T));
    at += sizeof(T);
  }
  return out;
}

void expect_identical(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_EQ(a.at_flat(i), b.at_flat(i)) << "element " << i;
}

TEST(SparseFormat, HandComputedSizes) {
  const Tensor w = small();
  EXPECT_EQ(dense_bytes(w), 48);    // 12 * 4
  EXPECT_EQ(csr_bytes(w), 34);      // (3 + 1) * 4 + 3 * 2 + 3 * 4
  EXPECT_EQ(bitmask_bytes(w), 14);  // ceil(12 / 8) + 3 * 4
  const SparseEncoding best = smallest_encoding(w);
  EXPECT_EQ(best.kind, SparseEncoding::bitmask);
  EXPECT_EQ(best.bytes, 14);

  const Tensor full = matrix({2, 2}, {1, 2, 3, 4});  // dense 16, csr 12 + 8 + 16 = 36, bitmask 1 + 16 = 17
  EXPECT_EQ(csr_bytes(full), 36);
  EXPECT_EQ(bitmask_bytes(full), 17);
  EXPECT_EQ(smallest_encoding(full).kind, SparseEncoding::dense);
  EXPECT_EQ(smallest_encoding(full).bytes, 16);

  Tensor wide = Tensor::zeros({1, 70000}, DType::f32);  // row length >= 65536: s32 column indices
  wide.set_flat(3, 1.0);
  wide.set_flat(69999, -4.0);
  EXPECT_EQ(csr_bytes(wide), 2 * 4 + 2 * 4 + 2 * 4);
  EXPECT_EQ(bitmask_bytes(wide), 8750 + 8);
  EXPECT_EQ(smallest_encoding(wide).kind, SparseEncoding::csr);
  Tensor narrow = Tensor::zeros({1, 65535}, DType::f32);
  narrow.set_flat(65534, 1.0);
  EXPECT_EQ(csr_bytes(narrow), 2 * 4 + 2 + 4);
}

TEST(SparseFormat, EncodedBytesMatchTheLayout) {
  const Tensor w = small();
  const EncodedWeight csr = encode(w, SparseEncoding::csr);
  std::vector<uint8_t> want = bytes_of<int32_t>({0, 1, 1, 3});
  for (auto part : {bytes_of<uint16_t>({1, 0, 3}), bytes_of<float>({1.5f, -2.0f, 3.25f})})
    want.insert(want.end(), part.begin(), part.end());
  EXPECT_EQ(csr.bytes, want);

  const EncodedWeight bm = encode(w, SparseEncoding::bitmask);
  want = {0x02, 0x09};  // elements 1 | 8, 11, least significant bit first
  const auto vals = bytes_of<float>({1.5f, -2.0f, 3.25f});
  want.insert(want.end(), vals.begin(), vals.end());
  EXPECT_EQ(bm.bytes, want);
  EXPECT_EQ(bm.shape, (Shape{3, 4}));
}

TEST(SparseFormat, RoundTripsExactlyAtTheComputedSize) {
  Rng rng(5);
  Tensor conv = test::random_tensor({4, 3, 3, 3}, rng);
  for (int64_t i = 0; i < conv.numel(); ++i)
    if (rng.uniform() < 0.7)
      conv.set_flat(i, 0.0);
  Tensor wide = Tensor::zeros({2, 70000}, DType::f32);
  wide.set_flat(5, 0.25);
  wide.set_flat(70000 + 69998, -7.5);
  for (const Tensor& w : {small(), conv, wide, Tensor::zeros({3, 5}, DType::f32), matrix({2, 2}, {1, 2, 3, 4})}) {
    const std::pair<SparseEncoding::Kind, int64_t> kinds[] = {{SparseEncoding::dense, dense_bytes(w)},
                                                              {SparseEncoding::csr, csr_bytes(w)},
                                                              {SparseEncoding::bitmask, bitmask_bytes(w)}};
    for (const auto& [kind, size] : kinds) {
      const EncodedWeight e = encode(w, kind);
      EXPECT_EQ(static_cast<int64_t>(e.bytes.size()), size) << w.describe() << " kind " << kind;
      expect_identical(decode(e), w);
    }
  }
  // bf16 weights are stored as f32 values and come back unchanged.
  Tensor bf = test::random_tensor({4, 8}, rng, DType::bf16);
  bf.set_flat(3, 0.0);
  const Tensor back = decode(encode(bf, SparseEncoding::csr));
  for (int64_t i = 0; i < bf.numel(); ++i)
    EXPECT_EQ(back.at_flat(i), bf.at_flat(i));
}

TEST(SparseFormat, RejectsMalformedPayloads) {
  const Tensor w = small();
  for (auto kind : {SparseEncoding::dense, SparseEncoding::csr, SparseEncoding::bitmask}) {
    EncodedWeight e = encode(w, kind);
    EncodedWeight shorter = e;
    shorter.bytes.pop_back();
    EXPECT_THROW(decode(shorter), DataError) << kind;
    EncodedWeight longer = e;
    longer.bytes.push_back(0);
    EXPECT_THROW(decode(longer), DataError) << kind;
  }
  EncodedWeight bad_col = encode(w, SparseEncoding::csr);
  bad_col.bytes[16] = 9;  // first column index (after 4 row pointers): 9 >= 4 columns
  EXPECT_THROW(decode(bad_col), DataError);
  EncodedWeight bad_ptr = encode(w, SparseEncoding::csr);
  bad_ptr.bytes[4] = 2;  // row pointers 0, 2, 1, 3
  EXPECT_THROW(decode(bad_ptr), DataError);
}

}  // namespace
}  // namespace lathe
