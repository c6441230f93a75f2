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

  /// Whether `backend` runs `op` natively at this (low) precision: false at f32 and when emulated.
  bool native(const Backend& backend, Op op) const { return active() && backend.supports(op, m_precision); }

  /// `t` as a matmul operand of `op`: `t` itself at f32 or when it already is a native low-precision
  /// tensor (a bf16 activation); else a low-precision copy in `buf` (a real bf16/f16 tensor when the
  /// backend runs `op` natively, f32 holding rounded values otherwise).
  const Tensor& operand(Backend& backend, Op op, const Tensor& t, Tensor& buf) const;
  /// Rounds an f32 result to the low precision, in place (nothing at f32, nothing to a result the
  /// backend already wrote in the low precision).
  void round_result(Backend& backend, Tensor& t) const;

  /// The operands a training step converts twice (the input: forward and weight gradient; the
  /// weights: forward and data gradient).
  enum class Slot { input, weights };
  /// operand() in forward; in a training forward it also remembers which tensor (storage, shape,
  /// strides) and which step `buf` was converted from, so that backward_operand() of the same
  /// step can reuse the copy instead of converting again. Any other forward (evaluation included)
  /// replaces or drops that record first. The record cannot see a tensor changed in place: nothing
  /// may write into a layer's input or weights between its training forward and backward (the
  /// optimizer and the pruning masks act after backward).
  const Tensor& forward_operand(Slot slot, Backend& backend, Op op, const Tensor& t, Tensor& buf, bool training,
                                uint64_t step);
  /// The operand for backward: `buf` as forward_operand() left it when it was converted from this
  /// very tensor in this training step, else a fresh operand().
  const Tensor& backward_operand(Slot slot, Backend& backend, Op op, const Tensor& t, Tensor& buf, bool training,
                                 uint64_t step) const;

 private:
  struct Record {  // what forward_operand() last converted into a slot's buffer
    bool valid = false;
    const void* raw = nullptr;
    Shape shape;
    std::vector<int64_t> strides;
    uint64_t step = 0;
  };
  DType m_precision = DType::f32;
  Record m_records[2];
};

/// Whether `backend` runs `op` with real `precision` kernels (true at f32), false when emulated.
bool runs_natively(const Backend& backend, Op op, DType precision);

}  // namespace lathe
