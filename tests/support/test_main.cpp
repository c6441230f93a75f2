// GoogleTest main shared by every suite: registers the CUDA backend when it
// is linked, so GPU tests can find a device (or skip saying why).
#include <gtest/gtest.h>

#ifdef LATHE_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

int main(int argc, char** argv) {
#ifdef LATHE_HAVE_CUDA
  lathe::cuda::register_backend();
#endif
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
