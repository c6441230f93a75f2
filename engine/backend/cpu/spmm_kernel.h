// The CSR x dense row kernel, written once over a vector type V: each row of C is built in
// registers, 8 vectors of columns at a time (then 2, then one masked vector for the tail), one
// broadcast weight per nonzero times the matching row of B; a single column (batch 1) gathers B
// along the row instead. spmm_avx2.cpp and spmm_avx512.cpp include this inside their own
// target region (`#pragma GCC target`, or clang's attribute push) with their V (width, load/store/fma, masks, gather, sum), so each
// instantiation is compiled for its ISA. Everything this header uses must already be included
// before that region (so no shared inline code is compiled for the wider ISA).
#pragma once

namespace lathe::detail {

/// Rows [r0, r1) of C = post(bias + A B) with V's vectors.
template <class V>
inline void spmm_rows_simd(const CsrMatrix& a, const SpmmArgs& x, int64_t r0, int64_t r1) {
  using Reg = typename V::Reg;
  constexpr int64_t W = V::kWidth;
  auto post = [&](Reg v) { return x.relu ? V::relu(v) : v; };
  if (x.n == 1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t end = a.row_ptr[r + 1];
      int32_t k = a.row_ptr[r];
      Reg acc = V::zero();
      for (; k + W <= end; k += W)
        acc = V::fmadd(V::load(&a.values[k]), V::gather(x.b, &a.col_idx[k], x.ldb), acc);
      float sum = V::sum(acc) + (x.bias ? x.bias[r] : 0.0f);
      for (; k < end; ++k)
        sum += a.values[k] * x.b[static_cast<int64_t>(a.col_idx[k]) * x.ldb];
      x.c[r * x.ldc] = x.relu && sum < 0.0f ? 0.0f : sum;
    }
    return;
  }
  const int32_t* cols = a.col_idx.data();
  const float* vals = a.values.data();
  for (int64_t r = r0; r < r1; ++r) {
    const int32_t k0 = a.row_ptr[r], k1 = a.row_ptr[r + 1];
    const Reg init = V::set1(x.bias ? x.bias[r] : 0.0f);
    float* c = x.c + r * x.ldc;
    int64_t j = 0;
    for (; j + 8 * W <= x.n; j += 8 * W) {
      Reg acc[8] = {init, init, init, init, init, init, init, init};
      for (int32_t k = k0; k < k1; ++k) {
        const Reg w = V::set1(vals[k]);
        const float* b = x.b + static_cast<int64_t>(cols[k]) * x.ldb + j;
        for (int u = 0; u < 8; ++u)
          acc[u] = V::fmadd(w, V::load(b + u * W), acc[u]);
      }
      for (int u = 0; u < 8; ++u)
        V::store(c + j + u * W, post(acc[u]));
    }
    for (; j + 2 * W <= x.n; j += 2 * W) {
      Reg c0 = init, c1 = init;
      for (int32_t k = k0; k < k1; ++k) {
        const Reg w = V::set1(vals[k]);
        const float* b = x.b + static_cast<int64_t>(cols[k]) * x.ldb + j;
        c0 = V::fmadd(w, V::load(b), c0);
        c1 = V::fmadd(w, V::load(b + W), c1);
      }
      V::store(c + j, post(c0));
      V::store(c + j + W, post(c1));
    }
    for (; j < x.n; j += W) {
      const auto m = V::tail(x.n - j);  // all lanes when W or more remain
      Reg c0 = init;
      for (int32_t k = k0; k < k1; ++k) {
        const float* b = x.b + static_cast<int64_t>(cols[k]) * x.ldb + j;
        c0 = V::fmadd(V::set1(vals[k]), V::load_masked(b, m), c0);
      }
      V::store_masked(c + j, m, post(c0));
    }
  }
}

}  // namespace lathe::detail
