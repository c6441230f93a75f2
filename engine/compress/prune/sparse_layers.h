// Inference executors for pruned Linear and Conv2d layers on the CPU: each holds its weight both
// as CSR (for the backend's sparse_matmul, compressed_ops.h; spmm.h on the cpu backend) and dense (for oneDNN through
// the backend), and runs whichever measured faster for the batch size at hand. The first forward at a new batch size
// times both on that very input (the layer's real shape and density, on this device) and keeps
// the winner; `mode` can pin one path (tests, the density sweep). Backward is not supported:
// these are the deployed form, swapped in by SparseDeployment (sparse_deploy.h).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "engine/backend/cpu/spmm.h"
#include "engine/backend/formats/csr_matrix.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/linear.h"

namespace lathe {

enum class SparseKernelMode { measured, always_sparse, always_dense };

/// What the first forward at one batch size measured (best of a few runs each) and chose.
struct KernelChoice {
  double dense_ms = 0, sparse_ms = 0;
  bool sparse = false;
};

/// Shared by both executors: the weight in both forms, the choice per batch size.
class SparseExecutor : public Layer {
 public:
  MemoryFormat output_format(const Backend&, const std::vector<const Tensor*>&) const override {
    return MemoryFormat::contiguous;
  }
  void backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor& dst, const Tensor& diff_dst,
                const std::vector<Tensor*>& diff_src) override;
  bool can_fuse_relu() const override { return true; }
  void set_fused_relu(bool on) override { m_relu = on; }
  void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) override;

  void set_mode(SparseKernelMode mode) { m_mode = mode; }
  void set_isa(SpmmIsa isa);
  SpmmIsa isa() const { return m_isa; }
  const CsrMatrix& csr() const { return m_csr; }
  double density() const { return m_csr.density(); }
  /// Batch size -> what was measured and chosen (filled by forwards in `measured` mode).
  const std::map<int64_t, KernelChoice>& choices() const { return m_choices; }

 protected:
  SparseExecutor(const Tensor& weight, const Tensor* bias);
  virtual void forward_sparse(Backend& be, const Tensor& src, Tensor& dst) = 0;
  /// The CSR product prepared on `be` (Backend::make_sparse_matmul with this executor's ISA).
  SparseMatmulKernel& kernel(Backend& be);
  virtual void forward_dense(Backend& be, const Tensor& src, Tensor& dst) = 0;

  Tensor m_weight, m_bias;  // host f32 copies (m_bias undefined when the layer has none)
  CsrMatrix m_csr;
  bool m_relu = false;

 private:
  SparseKernelMode m_mode = SparseKernelMode::measured;
  SpmmIsa m_isa = spmm_best_isa();
  std::map<int64_t, KernelChoice> m_choices;
  std::unique_ptr<SparseMatmulKernel> m_kernel;
  const Backend* m_kernel_be = nullptr;
};

/// y = x W^T + b with W sparse: computes y^T = W x^T (the batch along the vector lanes).
class SparseLinear final : public SparseExecutor {
 public:
  explicit SparseLinear(Linear& dense);
  std::string kind() const override { return "sparse_linear"; }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) const override;
  int64_t flops_per_sample(const std::vector<Shape>&) const override { return 2 * m_csr.nnz(); }

 private:
  void forward_sparse(Backend& be, const Tensor& src, Tensor& dst) override;
  void forward_dense(Backend& be, const Tensor& src, Tensor& dst) override;
  int64_t m_in, m_out;
  std::vector<float> m_xt, m_yt;  // transposed input and output, reused
};

/// Convolution as W [OC, IC*KH*KW] sparse times the im2col matrix [IC*KH*KW, OH*OW] of each image.
/// The output has the layout the backend's own convolution writes (channels-last on oneDNN), so the
/// dense path runs the very kernel the original Conv2d did and the layers after it see no change;
/// the sparse path writes NCHW rows per image and scatters them into that layout.
class SparseConv2d final : public SparseExecutor {
 public:
  explicit SparseConv2d(Conv2d& dense);
  std::string kind() const override { return "sparse_conv2d"; }
  MemoryFormat output_format(const Backend& backend, const std::vector<const Tensor*>&) const override {
    return backend.preferred_conv_format();
  }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) const override;
  int64_t flops_per_sample(const std::vector<Shape>& inputs) const override;

 private:
  void forward_sparse(Backend& be, const Tensor& src, Tensor& dst) override;
  void forward_dense(Backend& be, const Tensor& src, Tensor& dst) override;
  int64_t m_in, m_out, m_kernel;
  ConvParams m_p;
  std::vector<std::vector<float>> m_cols;  // one im2col buffer per thread
  std::vector<std::vector<float>> m_rows;  // one [OC, OH*OW] output buffer per thread (non-NCHW dst)
};

/// The im2col matrix of one image: col[(c * k + kh) * k + kw, oh * OW + ow] = x[c, oh*s - p + kh,
/// ow*s - p + kw] (0 outside). `x` points at image n of a [N, C, H, W] tensor with the given strides.
void im2col(const float* x, int64_t c, int64_t h, int64_t w, int64_t stride_c, int64_t stride_h, int64_t stride_w,
            int64_t kernel, const ConvParams& p, float* col);

}  // namespace lathe
