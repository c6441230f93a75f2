// CudaInt8Model: an Int8Model's static plan on the GPU (see cuda_int8_model.h).
#include "engine/backend/cuda/cuda_int8_model.h"

#include <mutex>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "engine/backend/cuda/cuda_int8_linear.h"
#include "kernels/int8_gemm_io.cuh"
#include "kernels/int8_pool.cuh"

namespace lathe::cuda {

using Kind = Int8Model::Step::Kind;

struct CudaInt8Model::DeviceStep {
  const Int8Model::Step* step = nullptr;
  std::unique_ptr<CudaInt8Conv2d> conv;
  std::unique_ptr<CudaInt8Linear> linear;
};

namespace {

/// The kind of the f32 layer a step runs ("" for other steps).
std::string f32_layer_kind(const Int8Model& model, const Int8Model::Step& s) {
  if (s.kind != Kind::f32_layer)
    return "";
  return const_cast<Model&>(model.model()).layer(s.index).kind();
}

bool is_8bit(const Tensor& t) { return t.dtype() == DType::u8 || t.dtype() == DType::s8; }

}  // namespace

std::string CudaInt8Model::refusal(const Int8Model& model) {
  if (model.dynamic())
    return "dynamic INT8 (quant.mode ptq-dynamic) takes each batch's max |x| and rescales in f32 between layers; "
           "the GPU executor runs static (calibrated) plans only";
  for (const auto& sp : model.steps()) {
    const Int8Model::Step& s = *sp;
    switch (s.kind) {
      case Kind::quantize:
      case Kind::int8_conv:
      case Kind::int8_linear:
      case Kind::int8_maxpool:
      case Kind::int8_relu:
      case Kind::flatten_q:
        break;
      case Kind::f32_layer:
        if (f32_layer_kind(model, s) == "flatten")
          break;
        [[fallthrough]];
      default:
        return "step '" + s.text +
               "' runs in f32 (a layer kept in f32 by keep_f32 / mixed precision, or f32 between INT8 layers); the "
               "GPU executor runs INT8 layers, integer max pooling / ReLU and flatten only";
    }
  }
  return "";
}

CudaInt8Model::CudaInt8Model(CudaBackend& backend, const Int8Model& model) : m_be(backend), m_model(model) {
  const std::string why = refusal(model);
  if (!why.empty())
    throw ConfigError("INT8 on the GPU: " + why);
  for (const auto& sp : model.steps()) {
    DeviceStep d;
    d.step = sp.get();
    if (sp->kind == Kind::int8_conv)
      d.conv = std::make_unique<CudaInt8Conv2d>(backend, sp->conv->layer(), sp->conv->conv_params());
    else if (sp->kind == Kind::int8_linear)
      d.linear = std::make_unique<CudaInt8Linear>(backend, sp->linear->layer());
    m_steps.push_back(std::move(d));
  }
}

CudaInt8Model::~CudaInt8Model() = default;

std::string CudaInt8Model::kernels() const { return "cuBLASLt int8 GEMM + lathe int8 kernels (CudaInt8Model)"; }

Tensor CudaInt8Model::forward(const Tensor& images) {
  LATHE_CHECK(images.dtype() == DType::f32 && images.ndim() >= 1,
              "CudaInt8Model::forward: images must be f32 [N, ...], got ", images.describe());
  Tensor x = images;
  if (x.device().is_cpu()) {
    Tensor d = m_be.empty(x.shape(), DType::f32, x.format());
    m_be.copy(x, d);
    x = d;
  }
  LATHE_CHECK(x.device() == m_be.device(), "CudaInt8Model::forward: images on ", x.device().str(), ", the model on ",
              m_be.device().str());
  const int64_t N = x.dim(0);
  Shape want{N};
  want.insert(want.end(), m_model.model().input_shape().begin(), m_model.model().input_shape().end());
  if (x.shape() != want) {
    LATHE_CHECK(shape_numel(want) == x.numel() && x.is_contiguous(), "CudaInt8Model::forward: images ", x.describe(),
                " do not match the model input ", shape_str(want));
    x = x.view(want);
  }
  CudaContext& ctx = m_be.context();
  const StreamScope scope = ctx.activate();
  cudaStream_t stream = ctx.stream();
  bool flat = false;  // x is channels-last [N, C, H, W] that the next Linear reads as rows of H*W*C
  for (DeviceStep& d : m_steps) {
    const Int8Model::Step& s = *d.step;
    LATHE_CHECK(!flat || s.kind == Kind::int8_linear, "CudaInt8Model: internal error, '", s.text,
                "' after a channels-last flatten");
    switch (s.kind) {
      case Kind::quantize: {
        // As the CPU: channels-last first for a conv consumer, then elementwise in memory order.
        if (s.to_channels_last && x.ndim() == 4 && !x.is_channels_last()) {
          Tensor cl = m_be.empty(x.shape(), DType::f32, MemoryFormat::channels_last);
          m_be.copy(x, cl);
          x = cl;
        } else if (!x.is_contiguous() && !x.is_channels_last()) {
          Tensor c = m_be.empty(x.shape(), DType::f32);
          m_be.copy(x, c);
          x = c;
        }
        const QuantParams& p = s.params;
        Tensor q = m_be.empty(x.shape(), p.storage_dtype(), x.format());
        LATHE_CUDA_CHECK(kernels::int8_quantize(stream, static_cast<const float*>(x.raw()), x.numel(), p.scale[0],
                                                p.zero_point[0], p.qmin(), p.qmax(), !p.is_signed, q.raw()));
        x = q;
        break;
      }
      case Kind::int8_conv:
        x = d.conv->forward(x);
        break;
      case Kind::int8_linear: {
        if (flat) {
          const Int8LayerData& L = s.linear->layer();
          const int64_t row = x.numel() / std::max<int64_t>(N, 1);
          Tensor y = m_be.empty({N, d.linear->out_features()}, L.dst_dtype());
          d.linear->forward_rows(x.raw(), x.dtype(), N, row, y.raw());
          x = y;
          flat = false;
        } else {
          x = d.linear->forward(x);
        }
        break;
      }
      case Kind::int8_maxpool: {
        LATHE_CHECK(x.ndim() == 4 && is_8bit(x) && x.is_channels_last() && x.is_dense(),
                    "CudaInt8Model: max pooling expects dense channels-last s8/u8, got ", x.describe());
        const PoolParams& p = s.pool;
        const int64_t C = x.dim(1), H = x.dim(2), W = x.dim(3);
        const int64_t OH = conv_out_size(H, p.kernel_h, p.stride_h, p.pad_h),
                      OW = conv_out_size(W, p.kernel_w, p.stride_w, p.pad_w);
        LATHE_CHECK(OH > 0 && OW > 0, "CudaInt8Model: empty max-pool output for ", x.describe());
        Tensor y = m_be.empty({N, C, OH, OW}, x.dtype(), MemoryFormat::channels_last);
        LATHE_CUDA_CHECK(kernels::int8_maxpool_nhwc(stream, x.raw(), x.dtype() == DType::s8, N, C, H, W, p.kernel_h,
                                                    p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w, OH, OW,
                                                    y.raw()));
        x = y;
        break;
      }
      case Kind::int8_relu:
        LATHE_CHECK(is_8bit(x) && x.is_dense(), "CudaInt8Model: ReLU expects dense s8/u8, got ", x.describe());
        LATHE_CUDA_CHECK(
            kernels::int8_relu(stream, x.raw(), x.dtype() == DType::s8, x.numel(), s.params.zero_point[0]));
        break;
      case Kind::flatten_q:
        LATHE_CHECK(x.ndim() == 4 && x.is_channels_last() && x.is_dense(),
                    "CudaInt8Model: flatten expects channels-last, got ", x.describe());
        flat = true;  // no copy: the memory already is N rows of H*W*C
        break;
      case Kind::f32_layer: {
        // Only a flatten of f32 values (refusal() rejects every other f32 step): PyTorch's C, H, W
        // order, i.e. the contiguous memory viewed as [N, features].
        if (!x.is_contiguous()) {
          Tensor c = m_be.empty(x.shape(), x.dtype());
          m_be.copy(x, c);
          x = c;
        }
        x = x.view({N, x.numel() / std::max<int64_t>(N, 1)});
        break;
      }
      default:
        LATHE_CHECK(false, "CudaInt8Model: step '", s.text, "' is not covered");
    }
  }
  LATHE_CHECK(x.dtype() == DType::f32 && x.ndim() == 2, "CudaInt8Model: the plan ended with ", x.describe(),
              ", not f32 logits");
  return x;
}

namespace {

std::string refusal_of(const Int8Model& model) {
  if (device_count() == 0)
    return "no CUDA device: " + device_unavailable_reason();
  return CudaInt8Model::refusal(model);
}

std::unique_ptr<Int8DeviceExecutor> make_executor(Backend& backend, const Int8Model& model) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  LATHE_CHECK(cuda, "CudaInt8Model needs the CUDA backend, got '", backend.name(), "'");
  return std::make_unique<CudaInt8Model>(*cuda, model);
}

}  // namespace

void register_int8_executor() {
  static std::once_flag once;
  std::call_once(once, [] { register_cuda_int8_executor({&refusal_of, &make_executor}); });
}

}  // namespace lathe::cuda
