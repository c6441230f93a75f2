// Compressed execution on a backend: an s8/u8 linear or conv2d (Int8Kernel) and a CSR x dense
// product (SparseMatmulKernel), each prepared once from its format (engine/backend/formats/) by
// Backend::make_int8_kernel / make_sparse_matmul, as oneDNN creates a primitive once and executes it
// per batch. Which backend runs a dtype is its supports(op, dtype) (s8/u8 for linear and conv2d,
// f32 for sparse_matmul), oneDNN-style implementation lists keyed by data type: the reference
// backend's plain loops are the oracle, the cpu backend runs oneDNN int8 and the AVX2/AVX-512 CSR
// kernels, the cuda backend cuBLASLt int8 and cuSPARSE.
//
// The op contract (shapes, dtypes, device) is checked once, in the non-virtual entry points here
// and in Backend (op_contract.h), before a backend's implementation runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/formats/csr_matrix.h"
#include "engine/backend/formats/int8_layer_data.h"

namespace lathe {

class Backend;

/// A prepared s8/u8 linear (weights [O, K]) or conv2d (weights [O, C, KH, KW]) on one backend.
class Int8Kernel {
 public:
  virtual ~Int8Kernel() = default;
  Int8Kernel(const Int8Kernel&) = delete;
  Int8Kernel& operator=(const Int8Kernel&) = delete;

  /// Linear: src [N, K] (rows dense); conv2d: src [N, C, H, W] channels-last. In layer().src_dtype(),
  /// on the backend's device. Returns [N, O] contiguous or [N, O, OH, OW] channels-last in
  /// layer().dst_dtype() on that device. Throws lathe::Error naming the op and shapes on a bad src.
  Tensor forward(const Tensor& src);

  const Int8LayerData& layer() const { return m_layer; }
  bool is_conv() const { return m_is_conv; }
  const ConvParams& conv_params() const { return m_conv; }
  /// The op's name in messages: "int8 linear" or "int8 conv2d".
  const char* op_name() const { return m_is_conv ? "int8 conv2d" : "int8 linear"; }
  /// What ran the last forward ("brg:avx512_core_vnni", "reference loops", "cuBLASLt int8 GEMM").
  virtual std::string implementation() const = 0;

  /// Takes the integer max pooling `pool` that follows this conv into the kernel, where the backend's
  /// kernel can (true): forward then returns the pooled tensor, the same integers as this kernel's
  /// output through Backend::int8_maxpool2d (pooling commutes with the monotone requantization, so
  /// a kernel may pool accumulators and requantize a quarter of them). False changes nothing.
  bool fuse_maxpool(const PoolParams& pool);
  /// The pooling fused in by fuse_maxpool, if any.
  const PoolParams* fused_maxpool() const { return m_pool_fused ? &m_pool : nullptr; }

 protected:
  /// Checks the layer against the contract (op_contract.h); `device` is where src and dst live.
  Int8Kernel(const Int8LayerData& layer, const ConvParams* conv, Device device);
  /// src already checked against the contract; N > 0. With a fused pooling: the pooled output.
  virtual Tensor run(const Tensor& src) = 0;
  /// Whether this kernel can pool as fuse_maxpool describes (default: no).
  virtual bool can_fuse_maxpool(const PoolParams&) const { return false; }

 private:
  Int8LayerData m_layer;
  bool m_is_conv;
  ConvParams m_conv;
  Device m_device;
  PoolParams m_pool;
  bool m_pool_fused = false;
};

/// The CPU CSR kernels' instruction sets (make_sparse_matmul's cpu_isa; other backends ignore it).
enum class SpmmIsa { scalar, avx2, avx512 };

/// C[r, j] = post(bias[r] + sum_k A[r, k] * B[k, j]) for r < rows, j < n, on raw rows of the
/// backend's device (B [cols, n] and C [rows, n] row-major with row strides ldb, ldc).
struct SpmmArgs {
  const float* b = nullptr;
  int64_t ldb = 0;  ///< row stride of B (>= n)
  float* c = nullptr;
  int64_t ldc = 0;  ///< row stride of C (>= n)
  int64_t n = 0;
  const float* bias = nullptr;  ///< rows entries, or null
  bool relu = false;
};

struct SparseMatmulOptions {
  /// The CPU kernel's ISA; unset: the widest this CPU runs (spmm_best_isa).
  bool pin_isa = false;
  SpmmIsa isa = SpmmIsa::scalar;
};

/// A prepared CSR matrix A [rows, cols] (f32 values) on one backend: C = post(bias + A B).
class SparseMatmulKernel {
 public:
  virtual ~SparseMatmulKernel() = default;
  SparseMatmulKernel(const SparseMatmulKernel&) = delete;
  SparseMatmulKernel& operator=(const SparseMatmulKernel&) = delete;

  /// c [rows, n] = post(bias + A b): b [cols, n], c [rows, n] f32 with dense rows, bias [rows] f32
  /// or null, all on the backend's device. Throws lathe::Error naming the op and shapes on a mismatch.
  void run(const Tensor& b, const Tensor* bias, Tensor& c, PostOp post = PostOp::none);
  /// The same on raw rows (per-image im2col buffers of the sparse executors); checks n, ldb, ldc.
  void run_rows(const SpmmArgs& args);

  const CsrMatrix& matrix() const { return m_a; }
  virtual std::string implementation() const = 0;

 protected:
  SparseMatmulKernel(const CsrMatrix& a, Device device) : m_a(a), m_device(device) {}
  /// args checked against the contract; n > 0 and rows > 0.
  virtual void run_impl(const SpmmArgs& args) = 0;

 private:
  bool a_empty_work(const SpmmArgs& args) const;

  const CsrMatrix& m_a;  // owned by the caller (the plan step), outlives the kernel
  Device m_device;
};

}  // namespace lathe
