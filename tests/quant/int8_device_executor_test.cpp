// The device INT8 executor registry without a device: a CPU backend has none (Int8Model::forward is
// its executor), and asking for one is a ConfigError with the reason, never a silent CPU run.
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/compress/quant/int8_device_executor.h"
#include "tests/quant/int8_test_models.h"

namespace lathe {
namespace {

TEST(Int8DeviceExecutor, ACpuBackendHasNoneAndSaysWhy) {
  DnnlBackend be;
  auto m = test::small_cnn(be, 23);
  const Int8Model q(*m, be, test::calibrate_minmax(*m, be, test::random_images(32, 12, 9)));
  const std::string why = int8_device_refusal(be, q);
  EXPECT_NE(why.find("CPU"), std::string::npos) << why;
  EXPECT_THROW(make_int8_device_executor(be, q), ConfigError);
}

}  // namespace
}  // namespace lathe
