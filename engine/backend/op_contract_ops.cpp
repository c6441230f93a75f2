// The op contract of the lighter backend ops (see op_contract.h): pooling, elementwise, batch norm,
// dropout, loss, optimizers, sums and copies. Each message names the op and every operand's shape.
#include "engine/backend/op_contract.h"

#include <string>

namespace lathe::contract {

namespace {

std::string list(std::initializer_list<const Tensor*> ts) {
  std::string s;
  for (const Tensor* t : ts)
    s += (s.empty() ? "" : ", ") + (t && t->defined() ? t->describe() : std::string("none"));
  return s;
}

bool pooled(const PoolParams& p, const Tensor& in, const Tensor& out) {
  if (in.ndim() != 4 || out.ndim() != 4 || out.dim(0) != in.dim(0) || out.dim(1) != in.dim(1))
    return false;
  if (p.kernel_h <= 0 || p.kernel_w <= 0 || p.stride_h <= 0 || p.stride_w <= 0)
    return false;
  const int64_t oh = (in.dim(2) + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
  const int64_t ow = (in.dim(3) + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
  return oh > 0 && ow > 0 && out.dim(2) == oh && out.dim(3) == ow;
}

}  // namespace

void maxpool2d_forward(const PoolParams& p, const Tensor& src, const Tensor& dst) {
  LATHE_CHECK(
      src.defined() && dst.defined() && pooled(p, src, dst) && is_floating(src.dtype()) && is_floating(dst.dtype()),
      "maxpool2d_forward: want src [N, C, H, W], dst [N, C, OH, OW] (float, kernel ", p.kernel_h, "x", p.kernel_w,
      ", stride ", p.stride_h, "x", p.stride_w, ", padding ", p.pad_h, "x", p.pad_w, "); got ", list({&src, &dst}));
}

void maxpool2d_backward(const PoolParams& p, const Tensor& diff_dst, const Tensor& workspace, const Tensor& diff_src) {
  LATHE_CHECK(diff_dst.defined() && diff_src.defined() && pooled(p, diff_src, diff_dst) &&
                  is_floating(diff_dst.dtype()) && is_floating(diff_src.dtype()),
              "maxpool2d_backward: want diff_dst [N, C, OH, OW] of diff_src [N, C, H, W] (float, kernel ", p.kernel_h,
              "x", p.kernel_w, ", stride ", p.stride_h, "x", p.stride_w, ", padding ", p.pad_h, "x", p.pad_w,
              "); got diff_dst ", list({&diff_dst}), ", diff_src ", list({&diff_src}));
  LATHE_CHECK(workspace.defined(), "maxpool2d_backward: no workspace (run maxpool2d_forward first)");
}

void same_shape(const char* op, std::initializer_list<const Tensor*> operands) {
  bool ok = true;
  const Tensor* first = *operands.begin();
  for (const Tensor* t : operands)
    ok = ok && t->defined() && first->defined() && is_floating(t->dtype()) && t->dtype() == first->dtype() &&
         t->shape() == first->shape();
  LATHE_CHECK(ok, op, ": want float operands of one shape and dtype; got ", list(operands));
}

void float_tensor(const char* op, const Tensor& t) {
  LATHE_CHECK(t.defined() && is_floating(t.dtype()), op, ": want a float tensor; got ", list({&t}));
}

void batchnorm(const char* op, const Tensor& src, const Tensor& dst, std::initializer_list<const Tensor*> per_channel) {
  bool ok = src.defined() && dst.defined() && src.ndim() == 4 && dst.shape() == src.shape() &&
            is_floating(src.dtype()) && is_floating(dst.dtype());
  for (const Tensor* t : per_channel)
    ok = ok && t->defined() && t->ndim() == 1 && t->dim(0) == src.dim(1) && is_floating(t->dtype());
  LATHE_CHECK(ok, op, ": want src and dst [N, C, H, W] and per-channel tensors [C] (float); got src ", list({&src}),
              ", dst ", list({&dst}), ", per-channel ", list(per_channel));
}

void dropout(const char* op, double p, const Tensor& src, const Tensor& dst, const Tensor* mask) {
  LATHE_CHECK(p >= 0 && p < 1, op, ": dropout probability must be in [0, 1), got ", p);
  const bool ok = src.defined() && dst.defined() && src.shape() == dst.shape() && is_floating(src.dtype()) &&
                  is_floating(dst.dtype()) &&
                  (!mask || (mask->defined() && mask->dtype() == DType::u8 && mask->shape() == src.shape()));
  LATHE_CHECK(ok, op, ": want float src and dst of one shape", mask ? " and a u8 mask of it" : "", "; got ",
              list({&src, &dst, mask}));
}

void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor* diff_logits) {
  const bool ok = logits.defined() && labels.defined() && logits.ndim() == 2 && is_floating(logits.dtype()) &&
                  labels.ndim() == 1 && labels.dim(0) == logits.dim(0) && labels.dtype() == DType::s32 &&
                  (!diff_logits || (diff_logits->defined() && diff_logits->shape() == logits.shape() &&
                                    is_floating(diff_logits->dtype())));
  LATHE_CHECK(ok, "softmax_cross_entropy: want logits [N, C] (float), labels [N] (s32), diff_logits [N, C]; got ",
              "logits ", list({&logits}), ", labels ", list({&labels}), ", diff_logits ", list({diff_logits}));
}

void defined_tensor(const char* op, const Tensor& t) { LATHE_CHECK(t.defined(), op, ": undefined tensor"); }

void copy(const char* op, const Tensor& src, const Tensor& dst, bool convert) {
  LATHE_CHECK(src.defined() && dst.defined() && src.shape() == dst.shape() && (convert || src.dtype() == dst.dtype()),
              op, ": want src and dst of one shape", convert ? "" : " and dtype (reorder converts dtypes)", "; got ",
              list({&src}), " -> ", list({&dst}));
}

}  // namespace lathe::contract
