// Shared helpers for layers: parameter creation and PyTorch-style uniform initialisation.
#include "engine/nn/layer.h"

namespace lathe {

void init_uniform(Backend& backend, Tensor& t, double bound, Rng& rng) {
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  for (int64_t i = 0; i < host.numel(); ++i)
    host.set_flat(i, rng.uniform(-bound, bound));
  backend.copy(host, t);
}

Param make_param(Backend& backend, const std::string& name, const Shape& shape, DType dtype) {
  Param p;
  p.name = name;
  p.value = backend.zeros(shape, dtype);
  p.grad = backend.zeros(shape, dtype);
  return p;
}

}  // namespace lathe
