// The one backend registry: built-in reference and cpu, a registered backend made by name, "auto"
// choosing an accelerator with devices and falling back to cpu, and refusals that say why.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/reference_backend.h"

namespace lathe {
namespace {

bool listed(const std::string& name) {
  const std::vector<std::string> names = registered_backends();
  return std::find(names.begin(), names.end(), name) != names.end();
}

int g_devices = 0;
int fake_count() { return g_devices; }
std::unique_ptr<Backend> make_fake(int) { return std::make_unique<ReferenceBackend>(); }

TEST(BackendRegistry, BuiltInsAreRegisteredWithOneDevice) {
  EXPECT_TRUE(listed("reference"));
  EXPECT_TRUE(listed("cpu"));
  EXPECT_EQ(backend_device_count("reference"), 1);
  EXPECT_EQ(backend_device_count("cpu"), 1);
  EXPECT_EQ(backend_device_count("no-such"), 0);
  EXPECT_EQ(make_backend("reference")->name(), "reference");
  EXPECT_EQ(make_backend("cpu")->name(), "cpu");
}

TEST(BackendRegistry, ARegisteredBackendIsMadeByNameAndAutoPrefersItWithADevice) {
  g_devices = 0;
  register_backend("fake-accel", &make_fake, &fake_count);
  EXPECT_TRUE(listed("fake-accel"));
  try {
    make_backend("fake-accel");
    ADD_FAILURE() << "made a backend without a device";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no fake-accel device"), std::string::npos) << e.what();
  }
  if (cuda_device_count() == 0)  // with a real GPU registered first, auto takes that one
    EXPECT_EQ(make_backend("auto")->name(), "cpu");
  g_devices = 2;
  EXPECT_EQ(backend_device_count("fake-accel"), 2);
  EXPECT_NO_THROW(make_backend("fake-accel", 1));
  EXPECT_THROW(make_backend("fake-accel", 2), ConfigError);
  if (cuda_device_count() == 0)
    EXPECT_EQ(make_backend("auto")->name(), "reference");  // the fake's factory makes a ReferenceBackend
  g_devices = 0;
}

TEST(BackendRegistry, AnUnknownNameListsTheRegisteredOnes) {
  try {
    make_backend("tpu");
    ADD_FAILURE() << "made an unknown backend";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown backend 'tpu'"), std::string::npos) << what;
    EXPECT_NE(what.find("reference"), std::string::npos) << what;
    EXPECT_NE(what.find("cpu"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace lathe
