// The designer form: generated from the schema (every field gets a widget, unsupported ones
// disabled with the reason), round-trips a config, and marks validator errors at their fields.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QComboBox>
#include <QLineEdit>
#include <QSpinBox>
#include <algorithm>

#include "engine/run/config.h"
#include "engine/run/config_schema.h"
#include "gui_test_util.h"
#include "widgets/ui/experiment_form.h"

namespace lathe::ui {

TEST(GuiForm, EverySchemaFieldHasAWidgetOfItsKind) {
  ExperimentForm form;
  ASSERT_EQ(form.fieldPaths().size(), static_cast<qsizetype>(experiment_schema().size()));
  for (const FieldSpec& f : experiment_schema()) {
    FieldEditor* e = form.field(QString::fromStdString(f.path));
    ASSERT_NE(e, nullptr) << f.path;
    QWidget* w = e->widget();
    // Enabled when supported and it applies (AdamW's betas are off under the default SGD).
    EXPECT_EQ(w->isEnabled(), f.supported && form.applies(QString::fromStdString(f.path))) << f.path;
    switch (f.kind) {
      case FieldSpec::Kind::integer:
        EXPECT_NE(qobject_cast<QSpinBox*>(w), nullptr) << f.path;
        break;
      case FieldSpec::Kind::boolean:
        EXPECT_NE(qobject_cast<QCheckBox*>(w), nullptr) << f.path;
        break;
      case FieldSpec::Kind::enumeration:
        EXPECT_NE(qobject_cast<QComboBox*>(w), nullptr) << f.path;
        EXPECT_GE(qobject_cast<QComboBox*>(w)->count(), static_cast<int>(f.choices.size())) << f.path;
        break;
      default:
        break;
    }
    EXPECT_TRUE(w->toolTip().contains(QString::fromStdString(f.doc))) << f.path;
    if (!f.supported)
      EXPECT_TRUE(w->toolTip().contains(QString::fromStdString(f.unsupported_reason))) << f.path;
  }
  for (const char* section : {"data", "model", "train", "compute", "prune", "quant", "distill", "checkpoint", "cost"})
    EXPECT_TRUE(form.sections().contains(section)) << section;
}

TEST(GuiForm, RoundTripsEveryPreset) {
  for (const char* preset : {"default.json", "cnn.json", "mlp.json"}) {
    const nlohmann::json original = load_config_file(test::experiments_dir() + "/" + preset);
    ExperimentForm form;
    form.setConfig(original);
    EXPECT_EQ(validate_config(form.config()), validate_config(original)) << preset;
    EXPECT_FALSE(form.validate().is_null()) << preset;
  }
}

TEST(GuiForm, EditsReachTheConfig) {
  ExperimentForm form;
  form.setConfig(load_config_file(test::experiments_dir() + "/cnn.json"));
  qobject_cast<QSpinBox*>(form.field("train.batch_size")->widget())->setValue(64);
  qobject_cast<QComboBox*>(form.field("train.optimizer.type")->widget())->setCurrentText("adamw");
  qobject_cast<QLineEdit*>(form.field("train.optimizer.lr")->widget())->setText("0.003");
  qobject_cast<QCheckBox*>(form.field("data.augment.hflip")->widget())->setChecked(true);
  const nlohmann::json cfg = form.config();
  EXPECT_EQ(cfg["train"]["batch_size"], 64);
  EXPECT_EQ(cfg["train"]["optimizer"]["type"], "adamw");
  EXPECT_DOUBLE_EQ(cfg["train"]["optimizer"]["lr"].get<double>(), 0.003);
  EXPECT_EQ(cfg["data"]["augment"]["hflip"], true);
  EXPECT_FALSE(form.validate().is_null());
}

TEST(GuiForm, ValidatorErrorsAreMarkedAtTheirFields) {
  nlohmann::json cfg = load_config_file(test::experiments_dir() + "/cnn.json");
  cfg["train"]["batch_size"] = 0;
  cfg["train"]["epochs"] = -1;
  cfg["train"]["optimizer"]["lr"] = "fast";
  cfg["data"]["bogus"] = 1;
  ExperimentForm form;
  form.setConfig(cfg);
  EXPECT_TRUE(form.validate().is_null());
  EXPECT_TRUE(form.field("train.batch_size")->error().startsWith("train.batch_size: 0 is out of range"))
      << form.field("train.batch_size")->error().toStdString();
  EXPECT_TRUE(form.field("train.epochs")->error().contains("-1"));
  EXPECT_TRUE(form.field("train.optimizer.lr")->error().startsWith("train.optimizer.lr"));
  EXPECT_TRUE(form.field("train.batch_size")->widget()->property("fieldError").toBool());
  EXPECT_TRUE(form.field("train.batch_size")->widget()->toolTip().startsWith("train.batch_size: 0"));
  EXPECT_TRUE(form.field("seed")->error().isEmpty());
  // The unknown key has no field; it is still listed.
  EXPECT_TRUE(form.errors().join("\n").contains("data.bogus"));

  // Fixing the values clears the marks.
  cfg["train"]["batch_size"] = 32;
  cfg["train"]["epochs"] = 1;
  cfg["train"]["optimizer"].erase("lr");
  cfg["data"].erase("bogus");
  form.setConfig(cfg);
  EXPECT_FALSE(form.validate().is_null());
  EXPECT_TRUE(form.field("train.batch_size")->error().isEmpty());
  EXPECT_FALSE(form.field("train.batch_size")->widget()->property("fieldError").toBool());
}

TEST(GuiForm, UnsupportedKnobAwayFromDefaultIsMarked) {
  const FieldSpec* unsupported = nullptr;
  for (const FieldSpec& f : experiment_schema())
    if (!f.supported && (f.kind == FieldSpec::Kind::number || f.kind == FieldSpec::Kind::integer)) {
      unsupported = &f;
      break;
    }
  if (!unsupported)
    GTEST_SKIP() << "every numeric knob is supported now; nothing to check";
  nlohmann::json cfg = load_config_file(test::experiments_dir() + "/cnn.json");
  const double v = unsupported->default_value.get<double>() + 1;
  std::string pointer = "/" + unsupported->path;
  std::replace(pointer.begin(), pointer.end(), '.', '/');
  cfg[nlohmann::json::json_pointer(pointer)] = v;
  ExperimentForm form;
  form.setConfig(cfg);
  EXPECT_TRUE(form.validate().is_null());
  EXPECT_FALSE(form.field(QString::fromStdString(unsupported->path))->error().isEmpty()) << unsupported->path;
}

}  // namespace lathe::ui
