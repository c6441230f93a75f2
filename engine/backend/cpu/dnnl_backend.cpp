// TEMPORARY skeleton: forwards to the reference loops until the oneDNN primitives land.
#include "engine/backend/cpu/dnnl_backend.h"

namespace lathe {

struct DnnlBackend::Impl {};
DnnlBackend::DnnlBackend() : m_impl(std::make_unique<Impl>()) {}
DnnlBackend::~DnnlBackend() = default;
bool DnnlBackend::supports(Op op, DType dtype) const { return dtype == DType::f32; }
size_t DnnlBackend::primitives_created() const { return 0; }
void DnnlBackend::reorder(const Tensor& s, Tensor& d) { ReferenceBackend::reorder(s, d); }
void DnnlBackend::linear_forward(const Tensor& a, const Tensor& b, const Tensor* c, Tensor& d, PostOp p) { ReferenceBackend::linear_forward(a, b, c, d, p); }
void DnnlBackend::linear_backward_data(const Tensor& a, const Tensor& b, Tensor& c) { ReferenceBackend::linear_backward_data(a, b, c); }
void DnnlBackend::linear_backward_weights(const Tensor& a, const Tensor& b, Tensor& c, Tensor* d) { ReferenceBackend::linear_backward_weights(a, b, c, d); }
void DnnlBackend::conv2d_forward(const ConvParams& p, const Tensor& a, const Tensor& b, const Tensor* c, Tensor& d, PostOp q) { ReferenceBackend::conv2d_forward(p, a, b, c, d, q); }
void DnnlBackend::conv2d_backward_data(const ConvParams& p, const Tensor& a, const Tensor& b, Tensor& c) { ReferenceBackend::conv2d_backward_data(p, a, b, c); }
void DnnlBackend::conv2d_backward_weights(const ConvParams& p, const Tensor& a, const Tensor& b, Tensor& c, Tensor* d) { ReferenceBackend::conv2d_backward_weights(p, a, b, c, d); }
void DnnlBackend::maxpool2d_forward(const PoolParams& p, const Tensor& a, Tensor& b, Tensor& c) { ReferenceBackend::maxpool2d_forward(p, a, b, c); }
void DnnlBackend::maxpool2d_backward(const PoolParams& p, const Tensor& a, const Tensor& b, Tensor& c) { ReferenceBackend::maxpool2d_backward(p, a, b, c); }
void DnnlBackend::relu_forward(const Tensor& a, Tensor& b) { ReferenceBackend::relu_forward(a, b); }
void DnnlBackend::relu_backward(const Tensor& a, const Tensor& b, Tensor& c) { ReferenceBackend::relu_backward(a, b, c); }
void DnnlBackend::add(const Tensor& a, const Tensor& b, Tensor& c) { ReferenceBackend::add(a, b, c); }
void DnnlBackend::axpy(double a, const Tensor& b, Tensor& c) { ReferenceBackend::axpy(a, b, c); }
void DnnlBackend::scale(Tensor& t, double a) { ReferenceBackend::scale(t, a); }
LossResult DnnlBackend::softmax_cross_entropy(const Tensor& a, const Tensor& b, Tensor* c, double d) { return ReferenceBackend::softmax_cross_entropy(a, b, c, d); }
void DnnlBackend::sgd_update(const SgdParams& p, Tensor& a, const Tensor& b, Tensor& c) { ReferenceBackend::sgd_update(p, a, b, c); }
void DnnlBackend::adamw_update(const AdamWParams& p, Tensor& a, const Tensor& b, Tensor& c, Tensor& d) { ReferenceBackend::adamw_update(p, a, b, c, d); }
double DnnlBackend::sum(const Tensor& t) { return ReferenceBackend::sum(t); }
double DnnlBackend::sum_squares(const Tensor& t) { return ReferenceBackend::sum_squares(t); }

}  // namespace lathe
