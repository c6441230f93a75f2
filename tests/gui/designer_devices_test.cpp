// The designer's compute.devices knob (issue #15): enabled, capped by what `lathe-cli devices
// --json` lists, and naming the GPUs or the CPU ranks under the form.
#include <gtest/gtest.h>

#include <QSpinBox>

#include "app/cli_devices.h"
#include "gui_test_util.h"
#include "widgets/ui/designer_panel.h"

namespace lathe::ui {

TEST(GuiDesignerDevices, KnobEnabledWithTheMaximumFromTheDeviceList) {
  DesignerPanel d(QString::fromStdString(test::experiments_dir()));
  FieldEditor* f = d.form()->field("compute.devices");
  ASSERT_NE(f, nullptr);
  auto* spin = qobject_cast<QSpinBox*>(f->widget());
  ASSERT_NE(spin, nullptr);
  EXPECT_TRUE(spin->isEnabled());
  d.setDevices({{"kind", "gpu"},
                {"gpus",
                 {{{"index", 0}, {"name", "NVIDIA H200"}, {"memory_bytes", 150ull << 30}},
                  {{"index", 1}, {"name", "NVIDIA H200"}, {"memory_bytes", 150ull << 30}},
                  {{"index", 2}, {"name", "NVIDIA H200"}, {"memory_bytes", 150ull << 30}}}},
                {"max_devices", 3}});
  EXPECT_EQ(spin->minimum(), 1);
  EXPECT_EQ(spin->maximum(), 3);
  EXPECT_TRUE(d.devicesText().contains("GPU 2: NVIDIA H200, 150 GiB")) << d.devicesText().toStdString();
  f->setValue(3);
  EXPECT_TRUE(d.form()->validate().is_object()) << d.form()->errors().join("\n").toStdString();

  d.setDevices({{"kind", "cpu"},
                {"gpus", nlohmann::json::array()},
                {"cpu", {{"cores", 8}, {"threads_per_rank", 1}}},
                {"max_devices", 8}});
  EXPECT_EQ(spin->maximum(), 8);
  f->setValue(2);
  EXPECT_TRUE(d.devicesText().contains("CPU ranks: 8 cores, 4 threads each")) << d.devicesText().toStdString();
}

TEST(GuiDesignerDevices, CpuListCapsTheKnobAtTheCores) {
  // What this (GPU-less) machine's `lathe-cli devices --json` says, shown by the designer.
  const nlohmann::json cpu = cli::cpu_devices_json(6, "no driver");
  EXPECT_EQ(cpu["kind"], "cpu");
  EXPECT_EQ(cpu["max_devices"], 6);
  EXPECT_EQ(cpu["cpu"]["cores"], 6);
  EXPECT_EQ(cpu["cpu"]["threads_per_rank"], 1);
  EXPECT_TRUE(cpu["gpus"].empty());
  EXPECT_EQ(cli::cpu_devices_json(200, "")["max_devices"], 64);  // the schema's maximum
  DesignerPanel d(QString::fromStdString(test::experiments_dir()));
  d.setDevices(cpu);
  EXPECT_EQ(qobject_cast<QSpinBox*>(d.form()->field("compute.devices")->widget())->maximum(), 6);
  EXPECT_TRUE(d.devicesText().contains("CPU ranks: 6 cores, 6 threads each")) << d.devicesText().toStdString();
}

}  // namespace lathe::ui
