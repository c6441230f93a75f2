// MainWindow: wires the widgets into the app. Left: the experiment designer with Run / Sweep /
// Stop. Right: Live (charts of the watched run and the run queue), Runs (the history browser),
// Compare; Sweep... queues a sweep here or submits it to Slurm (lathe-cli sweep --slurm, then its
// folder is watched); Watch folder... follows a Slurm sweep's shared folder (FolderImporter), Cancel sweep
// scancels it. Status bar: messages, the active run's progress with ETA, the store path. Runs are
// lathe-cli children (RunQueue); everything shown comes from the store (LiveFeed, RunBrowser,
// CompareView), so a run started from a terminal shows up the same way.
#pragma once

#include <QLabel>
#include <QMainWindow>
#include <QTabWidget>
#include <nlohmann/json.hpp>

#include "widgets/ui/chart_panel.h"
#include "widgets/ui/compare_view.h"
#include "widgets/ui/cost_panel.h"
#include "widgets/ui/designer_panel.h"
#include "widgets/ui/folder_importer.h"
#include "widgets/ui/queue_list.h"
#include "widgets/ui/run_browser.h"
#include "widgets/ui/run_progress.h"
#include "widgets/ui/run_queue.h"
#include "widgets/ui/store_tailer.h"
#include "widgets/ui/sweep.h"

namespace lathe::app {

class RunOverview;

struct WindowOptions {
  QString dbPath;
  QString cliPath;
  QString experimentsDir;
  QString configPath;       ///< loaded into the designer at start ("" = experiments/default.json)
  bool measureCost = true;  ///< the designer's cost panel runs `lathe-cli cost` as the design changes
};

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(const WindowOptions& options, QWidget* parent = nullptr);
  ~MainWindow() override;

  ui::DesignerPanel* designer() const { return m_designer; }
  ui::ChartPanel* charts() const { return m_charts; }
  ui::CostPanel* cost() const { return m_cost; }
  ui::RunBrowser* browser() const { return m_browser; }
  ui::CompareView* compare() const { return m_compare; }
  ui::RunQueue* queue() const { return m_queue; }
  ui::RunProgress* progress() const { return m_progress; }
  ui::LiveFeed* feed() const { return m_feed; }
  ui::FolderImporter* importer() const { return m_importer; }
  QTabWidget* tabs() const { return m_tabs; }
  /// The Overview tab's run overview and the one the Live tab shows when its run ends (nullptr
  /// without the report library).
  RunOverview* overview() const { return m_overview; }
  RunOverview* liveOverview() const { return m_liveOverview; }
  /// Shows the run's overview in the Overview tab.
  void showOverview(const QString& runId);
  /// false: no modal dialogs (tests, --screenshot); messages go to the status bar only.
  void setInteractive(bool interactive) { m_interactive = interactive; }
  /// "live", "runs", "compare" or "overview".
  void showTab(const QString& name);

 public slots:
  /// Validates the designer's config and queues it; false (with a dialog when interactive) when
  /// the config is invalid.
  bool runCurrent(bool interactive = true);
  void sweep();
  void stop();
  void watch(const QString& runId);
  /// Shows the run in the Live tab without switching to it (a queued run starting).
  void follow(const QString& runId);
  void compareRuns(const QStringList& runIds);
  void exportRuns(const QStringList& runIds);
  /// Export model (ONNX): the weights to write, a file, the export (model_export_action.h).
  void exportModel(const QString& runId);
  /// The run "Export model..." on the toolbar means: the one selected in Runs, else the run shown in
  /// Overview when that tab is open, else a Compare of one run, else the watched run ("" = none).
  QString modelExportRun() const;
  /// Imports a Slurm sweep's shared folder now and every 3 s (new runs and samples appear live).
  void watchFolder(const QString& folder);
  /// Writes the definition of `axes` over `base` into the folder and runs `lathe-cli sweep DEF
  /// --slurm --out FOLDER ...` as a child (slurm_sweep_args). Then `slurmSubmitted` (the job id in
  /// the status bar, the folder watched, the Runs tab on the sweep so Cancel sweep scancels it) or
  /// `slurmFailed` with lathe-cli's / sbatch's message (a dialog when interactive). Returns false
  /// when the child could not be started (with `slurmFailed`).
  bool submitSlurmSweep(const nlohmann::json& base, const std::vector<ui::SweepAxis>& axes,
                        const SlurmResources& resources);
  /// `lathe-cli sweep --cancel ID` (scancel of its job) for the sweep chosen in the Runs tab.
  void cancelSweep(const QString& sweepId);

 signals:
  void slurmSubmitted(const QString& sweepId, const QString& job, const QString& folder);
  void slurmFailed(const QString& text);

 private:
  void buildToolbar();
  void onRunEnded(const ui::QueuedRun& entry);
  void onRunsChanged(qint64 total, const QString& newestRunning);
  void updateActions();

  WindowOptions m_opt;
  ui::DesignerPanel* m_designer;
  ui::CostPanel* m_cost;
  ui::ChartPanel* m_charts;
  ui::RunBrowser* m_browser;
  ui::CompareView* m_compare;
  ui::RunQueue* m_queue;
  ui::QueueList* m_queueList;
  ui::RunProgress* m_progress;
  ui::LiveFeed* m_feed;
  QTabWidget* m_tabs;
  RunOverview* m_overview = nullptr;
  RunOverview* m_liveOverview = nullptr;
  QLabel* m_storeLabel;
  QAction *m_runAction, *m_sweepAction, *m_stopAction, *m_exportAction, *m_exportModelAction, *m_watchFolderAction,
      *m_cancelSweepAction;
  ui::FolderImporter* m_importer;
  bool m_interactive = true;
};

}  // namespace lathe::app
