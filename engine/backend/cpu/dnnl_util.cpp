// oneDNN helpers shared by the CPU backend and the INT8 layers.
#include "engine/backend/cpu/dnnl_util.h"

namespace lathe::dnnl_util {

dnnl::memory::data_type to_dnnl(DType d) {
  using dt = dnnl::memory::data_type;
  switch (d) {
    case DType::f32:
      return dt::f32;
    case DType::bf16:
      return dt::bf16;
    case DType::f16:
      return dt::f16;
    case DType::s8:
      return dt::s8;
    case DType::s32:
      return dt::s32;
    case DType::u8:
      return dt::u8;
    default:
      LATHE_FAIL("oneDNN has no ", dtype_name(d));
  }
}

dnnl::memory::desc md_of(const Tensor& t) {
  const dnnl::memory::dims dims(t.shape().begin(), t.shape().end());
  if (t.ndim() == 4 && t.is_channels_last())
    return dnnl::memory::desc(dims, to_dnnl(t.dtype()), dnnl::memory::format_tag::acdb);
  return dnnl::memory::desc(dims, to_dnnl(t.dtype()), dnnl::memory::dims(t.strides().begin(), t.strides().end()));
}

}  // namespace lathe::dnnl_util
