// kd_loss (host tensors, strided, f32/f64, numerically stable log-sum-exp) and its double reference.
#include "engine/compress/distill/kd_loss.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/core/error.h"

namespace lathe {

void check_kd_options(const KdLossOptions& o) {
  if (!(o.temperature > 0) || !std::isfinite(o.temperature))
    throw ConfigError("distill.temperature: " + std::to_string(o.temperature) +
                      " is out of range; allowed: a number > 0");
  if (!(o.alpha >= 0 && o.alpha <= 1))
    throw ConfigError("distill.alpha: " + std::to_string(o.alpha) + " is out of range; allowed: a number from 0 to 1");
}

namespace {

/// Fills p[0..c) with softmax(x / T) and returns log(sum(exp(x/T - max))) + max (the log partition).
template <class T>
double softmax_row(const T* x, int64_t stride, int64_t c, double temperature, double* p) {
  double mx = -INFINITY;
  for (int64_t j = 0; j < c; ++j)
    mx = std::max(mx, static_cast<double>(x[j * stride]) / temperature);
  double z = 0;
  for (int64_t j = 0; j < c; ++j) {
    p[j] = std::exp(static_cast<double>(x[j * stride]) / temperature - mx);
    z += p[j];
  }
  for (int64_t j = 0; j < c; ++j)
    p[j] /= z;
  return std::log(z) + mx;
}

template <class T>
int64_t argmax_row(const T* x, int64_t stride, int64_t c) {
  int64_t best = 0;
  for (int64_t j = 1; j < c; ++j)
    if (x[j * stride] > x[best * stride])
      best = j;
  return best;
}

template <class T>
KdLossResult kd_loss_typed(const Tensor& s_t, const Tensor& t_t, const int32_t* labels, const KdLossOptions& o,
                           Tensor* diff, double grad_scale) {
  const int64_t n = s_t.dim(0), c = s_t.dim(1);
  const T* s = s_t.data<T>();
  const T* t = t_t.data<T>();
  T* d = diff ? diff->data<T>() : nullptr;
  const int64_t ss0 = s_t.stride(0), ss1 = s_t.stride(1), ts0 = t_t.stride(0), ts1 = t_t.stride(1);
  const int64_t ds0 = diff ? diff->stride(0) : 0, ds1 = diff ? diff->stride(1) : 0;
  const double T_ = o.temperature, a = o.alpha;
  std::vector<double> ps(c), pt(c), p1(c);
  KdLossResult r;
  for (int64_t i = 0; i < n; ++i) {
    const T* si = s + i * ss0;
    const T* ti = t + i * ts0;
    const int y = labels[i];
    LATHE_CHECK(y >= 0 && y < c, "kd_loss: label ", y, " of sample ", i, " is outside [0, ", c, ")");
    const double log_zs = softmax_row(si, ss1, c, T_, ps.data());
    const double log_zt = softmax_row(ti, ts1, c, T_, pt.data());
    const double log_z1 = softmax_row(si, ss1, c, 1.0, p1.data());
    // KL(pt || ps) = sum pt * ((t - s)/T - log_zt + log_zs); terms with pt == 0 contribute 0.
    double kl = 0;
    for (int64_t j = 0; j < c; ++j)
      if (pt[j] > 0)
        kl += pt[j] * ((static_cast<double>(ti[j * ts1]) - static_cast<double>(si[j * ss1])) / T_ - log_zt + log_zs);
    const double soft = T_ * T_ * kl;
    const double hard = log_z1 - static_cast<double>(si[y * ss1]);
    r.soft_sum += soft;
    r.hard_sum += hard;
    r.total_sum += a * soft + (1 - a) * hard;
    r.correct += argmax_row(si, ss1, c) == y;
    r.teacher_correct += argmax_row(ti, ts1, c) == y;
    if (d) {
      T* di = d + i * ds0;
      for (int64_t j = 0; j < c; ++j)
        di[j * ds1] =
            static_cast<T>(grad_scale * (a * T_ * (ps[j] - pt[j]) + (1 - a) * (p1[j] - (j == y ? 1.0 : 0.0))));
    }
  }
  return r;
}

}  // namespace

KdLossResult kd_loss(const Tensor& student, const Tensor& teacher, const Tensor& labels, const KdLossOptions& options,
                     Tensor* diff_student, double grad_scale) {
  check_kd_options(options);
  LATHE_CHECK(student.device().is_cpu() && teacher.device().is_cpu() && labels.device().is_cpu() &&
                  (!diff_student || diff_student->device().is_cpu()),
              "kd_loss runs on host tensors only; the ",
              student.device().is_cpu() ? teacher.device().str() : student.device().str(),
              " backend has no distillation kernel yet (issue 5: use compute.backend = cpu or reference)");
  LATHE_CHECK(student.ndim() == 2 && student.shape() == teacher.shape(), "kd_loss: student logits ", student.describe(),
              " and teacher logits ", teacher.describe(), " must both be [N, classes]");
  LATHE_CHECK(student.dtype() == teacher.dtype(), "kd_loss: student is ", dtype_name(student.dtype()), ", teacher is ",
              dtype_name(teacher.dtype()));
  LATHE_CHECK(
      labels.dtype() == DType::s32 && labels.ndim() == 1 && labels.dim(0) == student.dim(0) && labels.is_contiguous(),
      "kd_loss: labels ", labels.describe(), " must be contiguous s32 [", student.dim(0), "]");
  if (diff_student)
    LATHE_CHECK(diff_student->shape() == student.shape() && diff_student->dtype() == student.dtype(),
                "kd_loss: gradient ", diff_student->describe(), " does not match the logits ", student.describe());
  const int32_t* y = labels.data<int32_t>();
  switch (student.dtype()) {
    case DType::f32:
      return kd_loss_typed<float>(student, teacher, y, options, diff_student, grad_scale);
    case DType::f64:
      return kd_loss_typed<double>(student, teacher, y, options, diff_student, grad_scale);
    default:
      LATHE_FAIL("kd_loss: logits in ", dtype_name(student.dtype()), " are not supported (f32 or f64)");
  }
}

KdLossResult kd_loss_reference(const std::vector<double>& s, const std::vector<double>& t,
                               const std::vector<int>& labels, int64_t n, int64_t c, const KdLossOptions& o,
                               std::vector<double>* grad) {
  auto softmax = [c](const double* x, double temperature) {
    std::vector<double> p(c);
    double z = 0;
    for (int64_t j = 0; j < c; ++j)
      z += std::exp(x[j] / temperature);
    for (int64_t j = 0; j < c; ++j)
      p[j] = std::exp(x[j] / temperature) / z;
    return p;
  };
  if (grad)
    grad->assign(n * c, 0.0);
  KdLossResult r;
  for (int64_t i = 0; i < n; ++i) {
    const double* si = &s[i * c];
    const double* ti = &t[i * c];
    const std::vector<double> ps = softmax(si, o.temperature), pt = softmax(ti, o.temperature), p1 = softmax(si, 1.0);
    double kl = 0;
    for (int64_t j = 0; j < c; ++j)
      kl += pt[j] * (std::log(pt[j]) - std::log(ps[j]));
    const double soft = o.temperature * o.temperature * kl;
    const double hard = -std::log(p1[labels[i]]);
    r.soft_sum += soft;
    r.hard_sum += hard;
    r.total_sum += o.alpha * soft + (1 - o.alpha) * hard;
    const int64_t s_best = std::max_element(si, si + c) - si, t_best = std::max_element(ti, ti + c) - ti;
    r.correct += s_best == labels[i];
    r.teacher_correct += t_best == labels[i];
    if (grad)
      for (int64_t j = 0; j < c; ++j)
        (*grad)[i * c + j] =
            o.alpha * o.temperature * (ps[j] - pt[j]) + (1 - o.alpha) * (p1[j] - (j == labels[i] ? 1.0 : 0.0));
  }
  return r;
}

}  // namespace lathe
