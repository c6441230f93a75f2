// The knowledge-distillation loss on logits (Hinton et al. 2015), per sample:
//   alpha * T^2 * KL(softmax(t/T) || softmax(s/T)) + (1 - alpha) * CE(softmax(s), y)
// with its gradient w.r.t. the student logits s:
//   alpha * T * (softmax(s/T) - softmax(t/T)) + (1 - alpha) * (softmax(s) - onehot(y)).
// kd_loss runs on host (CPU) tensors, f32 or f64, any 2-D strides; it is cheap ([N, classes]) and
// the Backend has no softmax-with-temperature op, so the CPU backends and the reference share it.
// Device tensors are refused with a message (the CUDA backend has no KD kernel yet).
// kd_loss_reference is the plain double oracle the tests compare kd_loss against.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"

namespace lathe {

struct KdLossOptions {
  double temperature = 4.0;  ///< T > 0
  double alpha = 0.7;        ///< weight of the soft-target term, in [0, 1]
};

struct KdLossResult {
  double soft_sum = 0;          ///< sum over samples of T^2 * KL(p_t || p_s) (unweighted by alpha)
  double hard_sum = 0;          ///< sum over samples of CE(s, y)
  double total_sum = 0;         ///< alpha * soft_sum + (1 - alpha) * hard_sum
  int64_t correct = 0;          ///< argmax(s) == y
  int64_t teacher_correct = 0;  ///< argmax(t) == y
};

/// Student logits `student` and teacher logits `teacher` [N, C] (host, f32/f64, same shape), labels s32 [N].
/// When `diff_student` is given (host, the student's shape and dtype) it is overwritten with
/// grad_scale * d(total_sum)/d(student).
KdLossResult kd_loss(const Tensor& student, const Tensor& teacher, const Tensor& labels, const KdLossOptions& options,
                     Tensor* diff_student, double grad_scale);

/// The oracle: row-major [n, c] doubles, written straight from the formula (explicit softmaxes,
/// logs and the KL sum). `grad` (resized to n*c) gets d(total_sum)/d(student) when given.
KdLossResult kd_loss_reference(const std::vector<double>& student, const std::vector<double>& teacher,
                               const std::vector<int>& labels, int64_t n, int64_t c, const KdLossOptions& options,
                               std::vector<double>* grad);

/// Throws ConfigError naming the field when T <= 0 or alpha is outside [0, 1].
void check_kd_options(const KdLossOptions& options);

}  // namespace lathe
