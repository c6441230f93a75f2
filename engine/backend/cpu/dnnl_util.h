// Small oneDNN helpers shared by the CPU backend and the INT8 layers: DType -> oneDNN data type,
// a memory descriptor from a Tensor's shape and strides, and the ReLU post-op.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/backend/backend.h"

namespace lathe::dnnl_util {

/// Throws lathe::Error for dtypes oneDNN does not have (f64).
dnnl::memory::data_type to_dnnl(DType d);

/// The tensor's dims and strides; a 4-D tensor that is both NCHW and NHWC (C == 1) is described as
/// NHWC, so oneDNN sees one layout through a network and picks its channels-last kernels.
dnnl::memory::desc md_of(const Tensor& t);

/// Appends max(x, 0) to `ops`.
inline void append_relu(dnnl::post_ops& ops) { ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f); }

/// An attr with a ReLU post-op when `post` asks for one.
inline dnnl::primitive_attr relu_attr(PostOp post) {
  dnnl::primitive_attr attr;
  if (post == PostOp::relu) {
    dnnl::post_ops po;
    append_relu(po);
    attr.set_post_ops(po);
  }
  return attr;
}

}  // namespace lathe::dnnl_util
