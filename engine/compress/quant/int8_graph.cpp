// Graph facts and the BatchNorm fold for INT8 planning (see int8_graph.h).
#include "engine/compress/quant/int8_graph.h"

#include <cmath>

namespace lathe {

std::vector<std::vector<int>> node_consumers(const Model& model) {
  std::vector<std::vector<int>> out(model.size());
  for (size_t i = 0; i < model.size(); ++i)
    for (int j : model.node_inputs(i))
      if (j != Model::kModelInput)
        out[static_cast<size_t>(j)].push_back(static_cast<int>(i));
  return out;
}

bool is_chain(const Model& model) {
  for (size_t i = 0; i < model.size(); ++i) {
    const std::vector<int>& in = model.node_inputs(i);
    const int want = i == 0 ? Model::kModelInput : static_cast<int>(i) - 1;
    if (in.size() != 1 || in[0] != want)
      return false;
  }
  return true;
}

int relu_fused_by_model(const Model& model_in, const std::vector<std::vector<int>>& consumers, size_t i) {
  Model& model = const_cast<Model&>(model_in);  // Layer's queries are not const
  if (!model.fuse_relu() || consumers[i].size() != 1 || !model.layer(i).can_fuse_relu())
    return -1;
  const int r = consumers[i][0];
  return model.layer(static_cast<size_t>(r)).kind() == "relu" ? r : -1;
}

int foldable_batchnorm(const Model& model_in, const std::vector<std::vector<int>>& consumers, size_t i) {
  Model& model = const_cast<Model&>(model_in);
  if (model.layer(i).kind() != "conv2d" || consumers[i].size() != 1)
    return -1;
  const int b = consumers[i][0];
  return model.layer(static_cast<size_t>(b)).kind() == "batchnorm2d" ? b : -1;
}

FoldedConv fold_batchnorm(const Tensor& weight, const Tensor* bias, const Tensor& gamma, const Tensor& beta,
                          const Tensor& mean, const Tensor& var, double eps) {
  LATHE_CHECK(weight.dtype() == DType::f32 && weight.device().is_cpu() && weight.ndim() >= 2,
              "fold_batchnorm: weights must be host f32 [O, ...], got ", weight.describe());
  const int64_t O = weight.dim(0);
  for (const Tensor* t : {&gamma, &beta, &mean, &var, bias})
    if (t)
      LATHE_CHECK(t->dtype() == DType::f32 && t->device().is_cpu() && t->numel() == O,
                  "fold_batchnorm: per-channel tensors must be host f32 [", O, "], got ", t->describe());
  const Tensor w = weight.is_contiguous() ? weight : weight.contiguous_copy();
  FoldedConv f{Tensor::empty(weight.shape(), DType::f32), Tensor::empty({O}, DType::f32)};
  const int64_t per = weight.numel() / O;
  const float* src = w.data<float>();
  float* dst = f.weight.data<float>();
  for (int64_t o = 0; o < O; ++o) {
    const double a = gamma.at_flat(o) / std::sqrt(var.at_flat(o) + eps);
    for (int64_t k = 0; k < per; ++k)
      dst[o * per + k] = static_cast<float>(src[o * per + k] * a);
    const double b = bias ? bias->at_flat(o) : 0.0;
    f.bias.data<float>()[o] = static_cast<float>((b - mean.at_flat(o)) * a + beta.at_flat(o));
  }
  return f;
}

}  // namespace lathe
