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

// Fields that do not apply to the chosen data.dataset (the schema's applies_when) are disabled with
// a tooltip saying when they apply, follow every change of the dataset, and are not written to the
// saved document unless it had them.
TEST(GuiForm, DataFieldsFollowTheDatasetAndOnlyWhatAppliesIsSaved) {
  ExperimentForm form;
  form.setConfig({{"name", "fm"}});
  auto* dataset = qobject_cast<QComboBox*>(form.field("data.dataset")->widget());
  ASSERT_NE(dataset, nullptr);
  ASSERT_EQ(dataset->currentText(), "fashion-mnist");
  auto enabled = [&](const char* path) { return form.field(path)->widget()->isEnabled(); };
  const QStringList folderOnly{"data.image_size", "data.channels"};
  const QStringList idxOnly{"data.train_images", "data.train_labels", "data.test_images", "data.test_labels"};
  for (const QString& p : folderOnly + idxOnly + QStringList{"data.num_classes"}) {
    EXPECT_FALSE(form.applies(p)) << p.toStdString();
    EXPECT_FALSE(form.field(p)->widget()->isEnabled()) << p.toStdString();
  }
  EXPECT_TRUE(enabled("data.path"));
  EXPECT_TRUE(enabled("data.train_subset"));  // no condition
  const QString tip = form.field("data.image_size")->widget()->toolTip();
  EXPECT_TRUE(tip.contains("Only used when data.dataset is \"folder\"")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("Not used now: data.dataset is \"fashion-mnist\"")) << tip.toStdString();
  EXPECT_TRUE(form.field("data.path")
                  ->widget()
                  ->toolTip()
                  .contains("Only used when data.dataset is \"fashion-mnist\", \"npz\" or \"folder\""));
  // Nothing the user did not set: no image_size 32 or channels 3 on a Fashion-MNIST experiment.
  EXPECT_EQ(form.config(), nlohmann::json({{"name", "fm"}}));

  dataset->setCurrentText("folder");  // live: every dependent field follows at once
  for (const QString& p : folderOnly)
    EXPECT_TRUE(form.field(p)->widget()->isEnabled()) << p.toStdString();
  for (const QString& p : idxOnly)
    EXPECT_FALSE(form.field(p)->widget()->isEnabled()) << p.toStdString();
  EXPECT_FALSE(form.field("data.image_size")->widget()->toolTip().contains("Not used now"));
  qobject_cast<QSpinBox*>(form.field("data.image_size")->widget())->setValue(64);
  qobject_cast<QLineEdit*>(form.field("data.path")->widget())->setText("/data/flowers");
  EXPECT_EQ(form.config(),
            nlohmann::json(
                {{"name", "fm"}, {"data", {{"dataset", "folder"}, {"path", "/data/flowers"}, {"image_size", 64}}}}));

  dataset->setCurrentText("idx");
  EXPECT_FALSE(enabled("data.image_size"));
  EXPECT_FALSE(enabled("data.path"));
  EXPECT_TRUE(enabled("data.train_images"));
  qobject_cast<QLineEdit*>(form.field("data.train_images")->widget())->setText("train.idx");
  EXPECT_EQ(form.config(),
            nlohmann::json({{"name", "fm"}, {"data", {{"dataset", "idx"}, {"train_images", "train.idx"}}}}));

  // Back to Fashion-MNIST: the other datasets' values stay in their editors but are not saved
  // (validate_config would refuse train_images here), and the config validates.
  dataset->setCurrentText("fashion-mnist");
  EXPECT_EQ(form.config(), nlohmann::json({{"name", "fm"}, {"data", {{"path", "/data/flowers"}}}}));  // it applies here
  qobject_cast<QLineEdit*>(form.field("data.path")->widget())->setText("");
  EXPECT_EQ(form.config(), nlohmann::json({{"name", "fm"}}));
  EXPECT_EQ(form.field("data.image_size")->value(), 64);
  EXPECT_FALSE(form.validate().is_null()) << form.errors().join("\n").toStdString();
  dataset->setCurrentText("folder");
  EXPECT_EQ(form.config()["data"]["image_size"], 64);

  // A loaded document keeps what it had, applying or not.
  const nlohmann::json loaded = {{"data", {{"channels", 1}}}};
  form.setConfig(loaded);
  EXPECT_FALSE(enabled("data.channels"));
  EXPECT_EQ(form.config(), loaded);
}

// The other conditions come from the same schema table: the optimizer's, the schedule's, f16's
// loss scaling, the model kind's; {"model": {"onnx": file}} alone shows model.zoo "onnx" (as
// validate_config reads it) and is saved as it was.
TEST(GuiForm, OtherConditionalFieldsFollowTheirSwitch) {
  ExperimentForm form;
  form.setConfig(nlohmann::json::object());
  auto combo = [&](const char* path) { return qobject_cast<QComboBox*>(form.field(path)->widget()); };
  auto enabled = [&](const char* path) { return form.field(path)->widget()->isEnabled(); };
  EXPECT_TRUE(enabled("train.optimizer.momentum"));
  EXPECT_FALSE(enabled("train.optimizer.beta1"));
  EXPECT_FALSE(enabled("train.schedule.gamma"));
  EXPECT_FALSE(enabled("train.loss_scale.init"));
  EXPECT_FALSE(enabled("model.layers"));
  EXPECT_FALSE(enabled("model.onnx"));
  combo("train.optimizer.type")->setCurrentText("adamw");
  combo("train.schedule.type")->setCurrentText("step");
  combo("train.precision")->setCurrentText("f16");
  combo("model.zoo")->setCurrentText("custom");
  EXPECT_FALSE(enabled("train.optimizer.momentum"));
  EXPECT_TRUE(enabled("train.optimizer.beta1"));
  EXPECT_TRUE(enabled("train.schedule.gamma"));
  EXPECT_FALSE(enabled("train.schedule.min_lr"));
  EXPECT_TRUE(enabled("train.loss_scale.init"));
  EXPECT_TRUE(enabled("model.layers"));

  const nlohmann::json onnxOnly = {{"model", {{"onnx", "net.onnx"}}}};
  form.setConfig(onnxOnly);
  EXPECT_EQ(combo("model.zoo")->currentText(), "onnx");
  EXPECT_TRUE(enabled("model.onnx"));
  EXPECT_EQ(form.config(), onnxOnly);
}

// The conditions beyond one enumeration's value, evaluated by the engine's field_applies against
// what the editors show: a number above a bound (cost.notice_s with simulated interruptions), a
// non-empty string (distill.* with a teacher), any of several conditions (quant.percentile under
// percentile calibration or with every calibrator compared) and several clauses at once
// (distill.feature_weight needs a teacher and feature pairs). Each follows its switches live, says
// why it is off, and a value set where it does nothing is not saved.
TEST(GuiForm, NumericStringAndCompoundConditionsFollowTheirFields) {
  ExperimentForm form;
  form.setConfig(nlohmann::json::object());
  auto enabled = [&](const char* path) { return form.field(path)->widget()->isEnabled(); };
  auto type = [&](const char* path, const QString& text) {  // as typed: QLineEdit::textEdited follows
    auto* line = qobject_cast<QLineEdit*>(form.field(path)->widget());
    ASSERT_NE(line, nullptr) << path;
    line->setText(text);
    emit line->textEdited(text);
  };
  auto tip = [&](const char* path) { return form.field(path)->widget()->toolTip().toStdString(); };

  // above: cost.interruptions_per_hour > 0
  EXPECT_FALSE(enabled("cost.notice_s"));
  EXPECT_NE(tip("cost.notice_s").find("Only used when cost.interruptions_per_hour > 0"), std::string::npos)
      << tip("cost.notice_s");
  EXPECT_NE(tip("cost.notice_s").find("Not used now: cost.interruptions_per_hour is 0."), std::string::npos)
      << tip("cost.notice_s");
  type("cost.notice_s", "30");
  EXPECT_FALSE(form.config().contains("cost")) << form.config().dump();  // no effect: not saved
  type("cost.interruptions_per_hour", "2");
  EXPECT_TRUE(enabled("cost.notice_s"));
  EXPECT_EQ(tip("cost.notice_s").find("Not used now"), std::string::npos) << tip("cost.notice_s");
  EXPECT_EQ(form.config()["cost"]["notice_s"], 30);
  type("cost.interruptions_per_hour", "0");
  EXPECT_FALSE(enabled("cost.notice_s"));

  // non_empty: distill.teacher, and with it distill.feature_pairs for the feature weight
  for (const char* p : {"distill.alpha", "distill.temperature", "distill.feature_pairs", "distill.feature_weight"})
    EXPECT_FALSE(enabled(p)) << p;
  EXPECT_TRUE(enabled("distill.teacher"));
  EXPECT_NE(tip("distill.alpha").find("Not used now: distill.teacher is \"\"."), std::string::npos)
      << tip("distill.alpha");
  type("distill.teacher", "zoo:teacher");
  EXPECT_TRUE(enabled("distill.alpha"));
  EXPECT_TRUE(enabled("distill.feature_pairs"));
  EXPECT_FALSE(enabled("distill.feature_weight"));
  EXPECT_NE(tip("distill.feature_weight").find("Not used now: distill.feature_pairs is \"\"."), std::string::npos)
      << tip("distill.feature_weight");
  type("distill.feature_pairs", "1:8");
  EXPECT_TRUE(enabled("distill.feature_weight"));
  type("distill.teacher", "");
  EXPECT_FALSE(enabled("distill.feature_weight"));
  EXPECT_FALSE(enabled("distill.alpha"));

  // a clause of two conditions under a clause of one: quant.percentile
  auto* mode = qobject_cast<QComboBox*>(form.field("quant.mode")->widget());
  auto* calibration = qobject_cast<QComboBox*>(form.field("quant.calibration")->widget());
  auto* compare = qobject_cast<QCheckBox*>(form.field("quant.compare_calibrators")->widget());
  EXPECT_FALSE(enabled("quant.calibration"));  // quant.mode none
  EXPECT_FALSE(enabled("quant.percentile"));
  mode->setCurrentText("ptq-static");
  EXPECT_TRUE(enabled("quant.calibration"));
  EXPECT_FALSE(enabled("quant.percentile"));  // minmax
  const std::string why = "Not used now: quant.calibration is \"minmax\"; quant.compare_calibrators is false.";
  EXPECT_NE(tip("quant.percentile").find(why), std::string::npos) << tip("quant.percentile");
  compare->setChecked(true);
  EXPECT_TRUE(enabled("quant.percentile"));  // the percentile calibrator is one of those compared
  compare->setChecked(false);
  calibration->setCurrentText("percentile");
  EXPECT_TRUE(enabled("quant.percentile"));
  mode->setCurrentText("ptq-dynamic");  // per-batch ranges: no calibration
  EXPECT_FALSE(enabled("quant.calibration"));
  EXPECT_FALSE(enabled("quant.percentile"));
  EXPECT_TRUE(enabled("quant.granularity"));

  // After all these edits, every field is still enabled exactly where it applies.
  for (const FieldSpec& f : experiment_schema())
    if (f.supported)
      EXPECT_EQ(form.field(QString::fromStdString(f.path))->widget()->isEnabled(),
                form.applies(QString::fromStdString(f.path)))
          << f.path;
}

// The stage sections follow their method and the teacher's kind: prune.* only with a prune.method
// (AGP's knobs only for l1-unstructured, the ratio not for nm), lowrank.* only with svd (scope not
// with a fixed rank), distill.teacher_epochs only for a zoo:<name> teacher and teacher_cache only for
// a saved one (a "starts with" condition).
TEST(GuiForm, StageKnobsFollowTheirMethodAndTheTeacherKind) {
  ExperimentForm form;
  form.setConfig(nlohmann::json::object());
  auto enabled = [&](const char* path) { return form.field(path)->widget()->isEnabled(); };
  auto choose = [&](const char* path, const char* text) {
    auto* box = qobject_cast<QComboBox*>(form.field(path)->widget());
    ASSERT_NE(box, nullptr) << path;
    box->setCurrentText(text);
  };
  auto type = [&](const char* path, const QString& text) {
    auto* line = qobject_cast<QLineEdit*>(form.field(path)->widget());
    ASSERT_NE(line, nullptr) << path;
    line->setText(text);
    emit line->textEdited(text);
  };
  auto spin = [&](const char* path, int value) {
    auto* box = qobject_cast<QSpinBox*>(form.field(path)->widget());
    ASSERT_NE(box, nullptr) << path;
    box->setValue(value);
  };
  auto tip = [&](const char* path) { return form.field(path)->widget()->toolTip().toStdString(); };

  for (const char* p : {"prune.ratio", "prune.scope", "prune.schedule", "prune.finetune_epochs", "prune.exclude",
                        "prune.sensitivity", "prune.agp.frequency"})
    EXPECT_FALSE(enabled(p)) << p;
  EXPECT_TRUE(enabled("prune.method"));
  EXPECT_NE(tip("prune.exclude").find("Not used now: prune.method is \"none\"."), std::string::npos)
      << tip("prune.exclude");
  choose("prune.method", "l1-unstructured");
  for (const char* p : {"prune.ratio", "prune.scope", "prune.schedule", "prune.finetune_epochs", "prune.sensitivity"})
    EXPECT_TRUE(enabled(p)) << p;
  EXPECT_FALSE(enabled("prune.agp.frequency"));
  choose("prune.schedule", "agp");
  EXPECT_TRUE(enabled("prune.agp.frequency"));
  choose("prune.method", "nm");  // prunes once, N:M: no schedule, no ratio
  EXPECT_FALSE(enabled("prune.agp.frequency"));
  EXPECT_FALSE(enabled("prune.schedule"));
  EXPECT_FALSE(enabled("prune.ratio"));
  EXPECT_TRUE(enabled("prune.nm_n"));
  EXPECT_TRUE(enabled("prune.exclude"));
  choose("prune.method", "l2-structured");
  EXPECT_TRUE(enabled("prune.ratio"));
  EXPECT_FALSE(enabled("prune.sensitivity"));

  EXPECT_FALSE(enabled("lowrank.rank"));
  choose("lowrank.method", "svd");
  EXPECT_TRUE(enabled("lowrank.scope"));
  EXPECT_TRUE(enabled("lowrank.target_bytes_ratio"));
  spin("lowrank.rank", 8);
  EXPECT_FALSE(enabled("lowrank.scope"));
  EXPECT_FALSE(enabled("lowrank.target_bytes_ratio"));
  EXPECT_TRUE(enabled("lowrank.exclude"));

  EXPECT_FALSE(enabled("distill.teacher_epochs"));
  EXPECT_FALSE(enabled("distill.teacher_cache"));
  type("distill.teacher", "zoo:teacher");
  EXPECT_TRUE(enabled("distill.teacher_epochs"));
  EXPECT_FALSE(enabled("distill.teacher_cache"));
  EXPECT_NE(tip("distill.teacher_cache")
                .find("Only used when distill.teacher is not empty, and "
                      "distill.cache_teacher is true, and distill.teacher does not start "
                      "with \"zoo:\""),
            std::string::npos)
      << tip("distill.teacher_cache");
  type("distill.teacher", "run:baseline");
  EXPECT_FALSE(enabled("distill.teacher_epochs"));
  EXPECT_TRUE(enabled("distill.teacher_cache"));
  spin("distill.teacher_epochs", 3);  // set while it is off: no effect, not saved
  EXPECT_FALSE(form.config()["distill"].contains("teacher_epochs")) << form.config().dump();

  for (const FieldSpec& f : experiment_schema())
    if (f.supported)
      EXPECT_EQ(form.field(QString::fromStdString(f.path))->widget()->isEnabled(),
                form.applies(QString::fromStdString(f.path)))
          << f.path;
}

}  // namespace lathe::ui
