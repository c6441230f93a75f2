// The small parameter types of the backend ops that compressed-execution formats also carry
// (a fused post-op, convolution and pooling geometry), apart from backend.h so that
// engine/backend/formats/ can name them without the whole op list.
#pragma once

#include <cstdint>

namespace lathe {

enum class PostOp : uint8_t { none, relu };

struct ConvParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
};

struct PoolParams {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
};

int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad);

}  // namespace lathe
