// Operand casts and result rounding for mixed-precision Linear/Conv2d (see matmul_precision.h).
#include "engine/nn/matmul_precision.h"

namespace lathe {

void MatmulPrecision::set(DType precision) {
  LATHE_CHECK(precision == DType::f32 || precision == DType::bf16 || precision == DType::f16,
              "compute precision must be f32, bf16 or f16, got ", dtype_name(precision));
  m_precision = precision;
}

bool runs_natively(const Backend& backend, Op op, DType precision) {
  return precision == DType::f32 || backend.supports(op, precision);
}

const Tensor& MatmulPrecision::operand(Backend& backend, Op op, const Tensor& t, Tensor& buf) const {
  if (!active())
    return t;
  const DType want = runs_natively(backend, op, m_precision) ? m_precision : DType::f32;
  if (want != DType::f32 && t.dtype() == want)
    return t;  // already stored at the low precision (Model's bf16 activations)
  if (!buf.defined() || buf.shape() != t.shape() || buf.dtype() != want || buf.format() != t.format() ||
      buf.device() != backend.device())
    buf = backend.empty(t.shape(), want, t.format());
  if (want == DType::f32)
    backend.round_to_precision(t, buf, m_precision);
  else
    backend.reorder(t, buf);
  return buf;
}

const Tensor& MatmulPrecision::forward_operand(Slot slot, Backend& backend, Op op, const Tensor& t, Tensor& buf,
                                               bool training, uint64_t step) {
  Record& r = m_records[static_cast<int>(slot)];
  r.valid = false;
  const Tensor& out = operand(backend, op, t, buf);
  if (training && active() && &out == &buf)
    r = Record{true, t.raw(), t.shape(), t.strides(), step};
  return out;
}

const Tensor& MatmulPrecision::backward_operand(Slot slot, Backend& backend, Op op, const Tensor& t, Tensor& buf,
                                                bool training, uint64_t step) const {
  const Record& r = m_records[static_cast<int>(slot)];
  if (r.valid && training && step == r.step && t.raw() == r.raw && t.shape() == r.shape && t.strides() == r.strides &&
      buf.defined())
    return buf;
  return operand(backend, op, t, buf);
}

void MatmulPrecision::round_result(Backend& backend, Tensor& t) const {
  if (active() && t.dtype() == DType::f32)
    backend.round_to_precision(t, t, m_precision);
}

}  // namespace lathe
