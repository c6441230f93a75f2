// AGP cubic schedule against hand-computed values: before start, start, mid, between updates, end,
// after end, an end that is not on the update grid, and invalid schedules rejected.
#include <gtest/gtest.h>

#include "engine/compress/prune/agp.h"
#include "engine/core/error.h"

namespace lathe {
namespace {

TEST(Agp, HandValues) {
  const AgpSchedule s{0.0, 0.8, 100, 200, 10};
  s.validate();
  EXPECT_DOUBLE_EQ(s.at(0), 0.0);  // before start
  EXPECT_DOUBLE_EQ(s.at(99), 0.0);
  EXPECT_DOUBLE_EQ(s.at(100), 0.0);                // start: (1 - 0)^3 = 1
  EXPECT_DOUBLE_EQ(s.at(120), 0.8 - 0.8 * 0.512);  // (1 - 0.2)^3 = 0.512 -> 0.3904
  EXPECT_NEAR(s.at(120), 0.3904, 1e-12);
  EXPECT_DOUBLE_EQ(s.at(150), 0.7);   // 0.8 - 0.8 * 0.125
  EXPECT_DOUBLE_EQ(s.at(159), 0.7);   // held until the next update
  EXPECT_DOUBLE_EQ(s.at(200), 0.8);   // end
  EXPECT_DOUBLE_EQ(s.at(5000), 0.8);  // after end
  const AgpSchedule t{0.1, 0.8, 100, 200, 10};
  EXPECT_DOUBLE_EQ(t.at(50), 0.1);
  EXPECT_DOUBLE_EQ(t.at(150), 0.8 - 0.7 * 0.125);  // 0.7125
  EXPECT_NEAR(t.at(190), 0.8 - 0.7 * 0.001, 1e-12);
}

TEST(Agp, UpdateSteps) {
  const AgpSchedule s{0.0, 0.5, 100, 200, 10};
  EXPECT_FALSE(s.update_at(90));
  EXPECT_TRUE(s.update_at(100));
  EXPECT_FALSE(s.update_at(105));
  EXPECT_TRUE(s.update_at(110));
  EXPECT_TRUE(s.update_at(200));
  EXPECT_FALSE(s.update_at(210));
  const AgpSchedule off_grid{0.0, 0.5, 0, 25, 10};  // updates at 0, 10, 20 and the end 25
  EXPECT_TRUE(off_grid.update_at(20));
  EXPECT_FALSE(off_grid.update_at(24));
  EXPECT_TRUE(off_grid.update_at(25));
  EXPECT_NEAR(off_grid.at(24), 0.5 - 0.5 * 0.2 * 0.2 * 0.2, 1e-12);  // t = 20: (1 - 20/25)^3
  EXPECT_DOUBLE_EQ(off_grid.at(25), 0.5);
}

TEST(Agp, RejectsInvalidSchedules) {
  EXPECT_THROW((AgpSchedule{0.0, 0.5, 10, 10, 1}.validate()), ConfigError);
  EXPECT_THROW((AgpSchedule{0.0, 0.5, 0, 10, 0}.validate()), ConfigError);
  EXPECT_THROW((AgpSchedule{0.6, 0.5, 0, 10, 1}.validate()), ConfigError);
  EXPECT_THROW((AgpSchedule{0.0, 1.5, 0, 10, 1}.validate()), ConfigError);
  EXPECT_THROW((AgpSchedule{-0.1, 0.5, 0, 10, 1}.validate()), ConfigError);
  EXPECT_NO_THROW((AgpSchedule{0.0, 1.0, 0, 10, 3}.validate()));
}

}  // namespace
}  // namespace lathe
