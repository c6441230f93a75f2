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
  if (!buf.defined() || buf.shape() != t.shape() || buf.dtype() != want || buf.format() != t.format() ||
      buf.device() != backend.device())
    buf = backend.empty(t.shape(), want, t.format());
  if (want == DType::f32)
    backend.round_to_precision(t, buf, m_precision);
  else
    backend.reorder(t, buf);
  return buf;
}

void MatmulPrecision::round_result(Backend& backend, Tensor& t) const {
  if (active())
    backend.round_to_precision(t, t, m_precision);
}

}  // namespace lathe
