// CostPanel: the designer's cost estimate, the numbers `lathe-cli cost CONFIG` prints: expected wall
// time and dollars on-demand and on spot, the recommended checkpoint interval (Young) beside Daly's,
// and the $-vs-interval curve as a chart. The measured inputs (step time projected over the run,
// a timed checkpoint write, the projection to the chosen instance) come from `lathe-cli cost CONFIG
// --json` itself, run as a child a moment after the design changes; the spot scenario
// (interruptions per hour, restart time; the design's cost.interruptions_per_hour and
// cost.restart_s when it sets them) is recomputed here at once with the same estimate_cost().
#pragma once

#include <QDoubleSpinBox>
#include <QLabel>
#include <QProcess>
#include <QTimer>
#include <QWidget>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/run/cost_estimate.h"

class QCustomPlot;
class QTemporaryDir;

namespace lathe::ui {

class CostPanel : public QWidget {
  Q_OBJECT
 public:
  /// `cliPath`: the lathe-cli that measures; "" measures nothing (applyMeasurement only).
  explicit CostPanel(QString cliPath, QWidget* parent = nullptr);
  ~CostPanel() override;

  /// The design changed: measure it again a moment later (the last of quick changes wins). A change
  /// of the design's cost.interruptions_per_hour or cost.restart_s sets the spot scenario's boxes.
  void setConfig(const nlohmann::json& config);
  void setInterruptionsPerHour(double lambda);
  void setRestartSeconds(double seconds);
  double interruptionsPerHour() const { return m_lambda->value(); }
  double restartSeconds() const { return m_restart->value(); }
  /// Takes the output of `lathe-cli cost CONFIG --json` as the measured inputs and recomputes.
  void applyMeasurement(const nlohmann::json& costJson);
  /// Starts the measurement now (what the timer does); false without a lathe-cli or a config.
  bool measureNow();

  bool hasEstimate() const { return m_estimate != nullptr; }
  const CostEstimate& estimate() const { return *m_estimate; }
  const CostInputs& inputs() const { return m_inputs; }
  QString summaryText() const { return m_summary->text(); }
  QString statusText() const { return m_status->text(); }
  QCustomPlot* curvePlot() const { return m_plot; }
  bool measuring() const { return m_process != nullptr; }

 signals:
  /// The estimate was recomputed (new measurement or spot scenario).
  void updated();

 private:
  void recompute();
  void onFinished(int code, QProcess::ExitStatus status);
  QString m_cli;
  nlohmann::json m_config;
  nlohmann::json m_measured;  ///< the last `lathe-cli cost --json` output
  CostInputs m_inputs;
  std::unique_ptr<PriceCatalog> m_catalog;
  std::unique_ptr<CostEstimate> m_estimate;
  QProcess* m_process = nullptr;
  std::unique_ptr<QTemporaryDir> m_tmp;
  bool m_pending = false;  ///< the design changed while a measurement ran
  QTimer m_debounce;
  QDoubleSpinBox* m_lambda;
  QDoubleSpinBox* m_restart;
  QLabel* m_summary;
  QLabel* m_status;
  QCustomPlot* m_plot;
};

}  // namespace lathe::ui
