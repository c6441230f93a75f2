// MatmulPrecision: how a Linear or Conv2d computes its three matmuls under mixed-precision training
// (PyTorch autocast semantics). Parameters stay f32 (the master weights); at f32 nothing changes.
// At bf16/f16 each matmul reads src, weights and diff_dst as low-precision values, accumulates in
// f32, and its results (dst, diff_src, diff_weights, diff_bias) are rounded to the low precision,
// as a bf16/f16 op would write them (so f16 gradients underflow and overflow as they really do).
// Where the backend has native kernels (supports(op, bf16)) the operands are real bf16 tensors;
// elsewhere they are f32 tensors holding the rounded values: the same numbers, emulated.
#pragma once

#include "engine/backend/backend.h"

namespace lathe {

class MatmulPrecision {
 public:
  /// f32 (off), bf16 or f16; throws naming the allowed values otherwise.
  void set(DType precision);
  DType precision() const { return m_precision; }
  bool active() const { return m_precision != DType::f32; }

  /// `t` as a matmul operand of `op`: `t` itself at f32; else a low-precision copy in `buf` (a real
  /// bf16/f16 tensor when the backend runs `op` natively, f32 holding rounded values otherwise).
  const Tensor& operand(Backend& backend, Op op, const Tensor& t, Tensor& buf) const;
  /// Rounds an f32 result to the low precision, in place (nothing at f32).
  void round_result(Backend& backend, Tensor& t) const;

 private:
  DType m_precision = DType::f32;
};

/// Whether `backend` runs `op` with real `precision` kernels (true at f32), false when emulated.
bool runs_natively(const Backend& backend, Op op, DType precision);

}  // namespace lathe
