// GoogleTest main shared by every suite: registers the CUDA backend (and its INT8 executor) when it
// is linked, so GPU tests can find a device (or skip saying why).
#include <gtest/gtest.h>

#ifdef LATHE_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_int8_model.h"
#endif

int main(int argc, char** argv) {
#ifdef LATHE_HAVE_CUDA
  lathe::cuda::register_backend();
  lathe::cuda::register_int8_executor();
#endif
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
