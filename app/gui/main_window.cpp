// MainWindow (see main_window.h).
#include "app/gui/main_window.h"

#include <QDir>
#include <QFileDialog>
#include <QGroupBox>
#include <QMessageBox>
#include <QProcess>
#include <QSplitter>
#include <QStatusBar>
#include <QToolBar>
#include <QVBoxLayout>

#include "app/cli_devices.h"
#include "app/gui/export_action.h"
#include "app/gui/model_export_action.h"
#ifdef LATHE_HAVE_REPORT
#include "app/gui/run_overview.h"
#endif
#include "engine/core/error.h"
#include "engine/core/file_write.h"
#include "widgets/ui/sweep_dialog.h"

namespace lathe::app {

MainWindow::MainWindow(const WindowOptions& options, QWidget* parent) : QMainWindow(parent), m_opt(options) {
  setWindowTitle("Lathe");
  resize(1480, 900);
  m_queue = new ui::RunQueue(m_opt.cliPath, m_opt.dbPath, this);
  m_feed = new ui::LiveFeed(m_opt.dbPath, 200, 250'000, 20'000, this);
  m_importer = new ui::FolderImporter(m_opt.dbPath, this);

  auto* split = new QSplitter(this);
  auto* designerSplit = new QSplitter(Qt::Vertical, split);
  m_designer = new ui::DesignerPanel(m_opt.experimentsDir, designerSplit);
  m_designer->setMinimumWidth(340);
  m_designer->setDevices(lathe::cli::devices_json());
  auto* costBox = new QGroupBox("Cost (lathe-cli cost)", designerSplit);
  auto* costLayout = new QVBoxLayout(costBox);
  costLayout->setContentsMargins(4, 4, 4, 4);
  m_cost = new ui::CostPanel(m_opt.measureCost ? m_opt.cliPath : QString(), costBox);
  costLayout->addWidget(m_cost);
  designerSplit->addWidget(m_designer);
  designerSplit->addWidget(costBox);
  designerSplit->setStretchFactor(0, 3);
  designerSplit->setStretchFactor(1, 1);
  designerSplit->setSizes({600, 300});
  m_tabs = new QTabWidget(split);
  auto* live = new QWidget(m_tabs);
  auto* liveLayout = new QVBoxLayout(live);
  liveLayout->setContentsMargins(2, 2, 2, 2);
  m_charts = new ui::ChartPanel(live);
  m_queueList = new ui::QueueList(m_queue, live);
  m_queueList->setMaximumHeight(90);
  auto* liveSplit = new QSplitter(Qt::Vertical, live);
  liveSplit->addWidget(m_charts);
#ifdef LATHE_HAVE_REPORT
  m_liveOverview = new RunOverview(m_opt.dbPath, liveSplit);  // shown when the watched run ends
  m_liveOverview->setObjectName("liveOverview");
  m_liveOverview->hide();
  liveSplit->addWidget(m_liveOverview);
#endif
  liveLayout->addWidget(liveSplit, 1);
  liveLayout->addWidget(m_queueList);
  m_tabs->addTab(live, "Live");
  m_browser = new ui::RunBrowser(m_opt.dbPath, m_tabs);
  m_tabs->addTab(m_browser, "Runs");
  m_compare = new ui::CompareView(m_opt.dbPath, m_tabs);
  m_tabs->addTab(m_compare, "Compare");
#ifdef LATHE_HAVE_REPORT
  m_overview = new RunOverview(m_opt.dbPath, m_tabs);
  m_tabs->addTab(m_overview, "Overview");
#endif
  split->addWidget(designerSplit);
  split->addWidget(m_tabs);
  split->setStretchFactor(1, 1);
  split->setSizes({380, 1100});
  setCentralWidget(split);

  m_progress = new ui::RunProgress(this);
  statusBar()->addPermanentWidget(m_progress);
  m_storeLabel = new QLabel("store: " + QDir::toNativeSeparators(m_opt.dbPath), this);
  m_storeLabel->setStyleSheet("color: #555;");
  statusBar()->addPermanentWidget(m_storeLabel);
  buildToolbar();

  connect(m_designer, &ui::DesignerPanel::message, this,
          [this](const QString& t) { statusBar()->showMessage(t, 5000); });
  connect(m_browser, &ui::RunBrowser::message, this, [this](const QString& t) { statusBar()->showMessage(t, 8000); });
  connect(m_designer->form(), &ui::ExperimentForm::validated, this, [this](bool ok, const QString& msg) {
    m_runAction->setEnabled(ok);
    m_runAction->setToolTip(ok ? "Run this experiment (lathe-cli run)" : "Fix the marked fields first:\n" + msg);
    if (ok)
      m_cost->setConfig(m_designer->form()->config());  // the cost panel follows the design
    if (!ok)
      statusBar()->showMessage("Config has errors: " + msg.section('\n', 0, 0), 8000);
    else if (statusBar()->currentMessage().startsWith("Config has errors"))
      statusBar()->clearMessage();  // fixed: the old complaint goes
  });
  connect(m_queue, &ui::RunQueue::runStarted, this, [this](const QString& runId, const QString& label) {
    statusBar()->showMessage("Running " + label + " (" + runId + ")", 5000);
    follow(runId);  // the Live tab follows it; the user stays where they are
  });
  connect(m_queue, &ui::RunQueue::runEnded, this, &MainWindow::onRunEnded);
  connect(m_queue, &ui::RunQueue::changed, this, &MainWindow::updateActions);
  connect(m_feed, &ui::LiveFeed::batchReady, this, [this](const ui::TailBatchPtr& batch) {
    if (batch->runId != m_feed->watched())
      return;  // a late batch of a run no longer watched
    m_charts->applyBatch(*batch);
    m_progress->applyBatch(*batch);
  });
  connect(m_feed, &ui::LiveFeed::runsChanged, this, &MainWindow::onRunsChanged);
  connect(m_feed, &ui::LiveFeed::failed, this, [this](const QString& t) { statusBar()->showMessage(t, 10000); });
  connect(m_browser, &ui::RunBrowser::watchRun, this, &MainWindow::watch);
  connect(m_importer, &ui::FolderImporter::imported, this, [this](int added, int updated, qint64 samples) {
    if (added + updated == 0 && samples == 0)
      return;
    statusBar()->showMessage(QString("Imported from %1: %2 new runs, %3 updated, %4 samples")
                                 .arg(m_importer->folder())
                                 .arg(added)
                                 .arg(updated)
                                 .arg(samples),
                             5000);
    m_browser->reload();
  });
  connect(m_importer, &ui::FolderImporter::failed, this,
          [this](const QString& t) { statusBar()->showMessage(t, 10000); });
  connect(m_browser, &ui::RunBrowser::showRun, this, &MainWindow::showOverview);
  connect(m_browser, &ui::RunBrowser::compareRuns, this, &MainWindow::compareRuns);
  connect(m_browser, &ui::RunBrowser::exportRuns, this, &MainWindow::exportRuns);
  connect(m_browser, &ui::RunBrowser::exportModel, this, &MainWindow::exportModel);
  connect(m_browser, &ui::RunBrowser::openConfig, this, [this](const nlohmann::json& cfg, const QString& id) {
    m_designer->setConfig(cfg, "(config of run " + id + ", not saved)");
    statusBar()->showMessage("Designer: config of run " + id, 5000);
  });
  connect(m_browser, &ui::RunBrowser::rerun, this, [this](const nlohmann::json& cfg, const QString& id) {
    m_queue->enqueue(cfg, {},
                     QString::fromStdString(cfg.value("name", std::string("run"))) + " (re-run of " + id.left(8) + ")");
  });

  connect(m_browser, &ui::RunBrowser::resumeRun, this, [this](const QString& id) {
    m_queue->enqueueResume(id);
    showTab("live");
  });

  QString config = m_opt.configPath;
  if (config.isEmpty() && !m_opt.experimentsDir.isEmpty())
    config = QDir(m_opt.experimentsDir).filePath("default.json");
  if (!config.isEmpty())
    m_designer->loadFile(config, false);
  updateActions();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildToolbar() {
  QToolBar* bar = addToolBar("Run");
  bar->setObjectName("runToolbar");
  bar->setMovable(false);
  bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  m_runAction = bar->addAction("Run", this, [this]() { runCurrent(true); });
  m_sweepAction = bar->addAction("Sweep...", this, &MainWindow::sweep);
  m_stopAction = bar->addAction("Stop", this, &MainWindow::stop);
  bar->addSeparator();
  m_exportAction = bar->addAction("Export...", this, [this]() {
    QStringList ids = m_browser->selectedRunIds();
    if (ids.isEmpty() && m_tabs->currentWidget() == m_compare)
      ids = m_compare->runIds();
    if (ids.isEmpty() && !m_feed->watched().isEmpty())
      ids << m_feed->watched();
    exportRuns(ids);
  });
  m_exportModelAction = bar->addAction("Export model...", this, [this]() { exportModel(modelExportRun()); });
  m_exportModelAction->setObjectName("exportModelToolbarAction");
  m_exportModelAction->setToolTip(
      "Write one run's model as ONNX (f32, pruned or INT8 QDQ): the run selected in Runs, shown in Overview, "
      "compared alone or watched");
  bar->addSeparator();
  m_watchFolderAction = bar->addAction("Watch folder...", this, [this]() {
    const QString dir = QFileDialog::getExistingDirectory(this, "A Slurm sweep's shared folder (--out)");
    if (!dir.isEmpty())
      watchFolder(dir);
  });
  m_watchFolderAction->setToolTip(
      "Import the per-task stores of a sweep submitted with lathe-cli sweep --slurm --out FOLDER, now and every 3 s");
  m_cancelSweepAction = bar->addAction("Cancel sweep", this, [this]() {
    cancelSweep(m_browser->sweepFilter()->currentData().toString());
  });
  m_cancelSweepAction->setToolTip("Cancel the Slurm sweep chosen in the Runs tab's sweep filter (scancel)");
  m_runAction->setShortcut(QKeySequence("Ctrl+R"));
  m_stopAction->setToolTip("Stop the running experiment (SIGTERM: it finishes the step and saves)");
  m_sweepAction->setToolTip(
      "One run per value of one or two knobs: queued here, or submitted to Slurm as a job array (Run on)");
  m_exportAction->setToolTip("Report of the selected runs (HTML, PDF or CSV)");
}

void MainWindow::watchFolder(const QString& folder) {
  m_importer->watch(folder);
  statusBar()->showMessage("Importing " + folder + " every 3 s", 5000);
}

void MainWindow::cancelSweep(const QString& sweepId) {
  if (sweepId.isEmpty()) {
    statusBar()->showMessage("Choose the sweep to cancel in the Runs tab's sweep filter first", 8000);
    return;
  }
  auto* proc = new QProcess(this);
  proc->setProcessChannelMode(QProcess::MergedChannels);
  connect(proc, &QProcess::finished, this, [this, proc, sweepId](int code, QProcess::ExitStatus) {
    const QString out = QString::fromUtf8(proc->readAll()).trimmed();
    statusBar()->showMessage(code == 0 ? "Sweep " + sweepId + " cancelled" : "Cancel failed: " + out, 10000);
    if (code != 0 && m_interactive)
      QMessageBox::warning(this, "Cancel sweep", out);
    m_browser->reload();
    proc->deleteLater();
  });
  proc->start(m_opt.cliPath, {"--db", m_opt.dbPath, "sweep", "--cancel", sweepId});
}

void MainWindow::updateActions() {
  m_stopAction->setEnabled(m_queue->busy());
  m_stopAction->setText(m_queue->pending() > 0 ? QString("Stop (%1 queued)").arg(m_queue->pending()) : QString("Stop"));
}

void MainWindow::showTab(const QString& name) {
  const QString n = name.toLower();
  m_tabs->setCurrentIndex(n == "runs" ? 1 : n == "compare" ? 2 : n == "overview" && m_overview ? 3 : 0);
}

void MainWindow::showOverview(const QString& runId) {
  if (runId.isEmpty())
    return;
#ifdef LATHE_HAVE_REPORT
  m_overview->showRun(runId);
  showTab("overview");
#else
  watch(runId);
#endif
}

bool MainWindow::runCurrent(bool interactive) {
  const nlohmann::json cfg = m_designer->form()->validate();
  if (cfg.is_null()) {
    if (interactive)
      QMessageBox::warning(this, "The experiment has errors",
                           "The fields marked in red are not valid:\n\n" + m_designer->form()->errors().join("\n") +
                               "\n\nFix them (hover a field for what it accepts) and press Run again.");
    return false;
  }
  if (m_opt.cliPath.isEmpty()) {
    if (interactive)
      QMessageBox::critical(this, "lathe-cli not found",
                            "The app runs experiments with lathe-cli, which was not found next to this program or "
                            "on PATH. Build it (cmake --build build --target lathe-cli) or set LATHE_CLI.");
    return false;
  }
  m_queue->enqueue(m_designer->form()->config());
  showTab("live");
  return true;
}

void MainWindow::sweep() {
  if (m_designer->form()->validate().is_null()) {
    QMessageBox::warning(this, "The experiment has errors", "Fix the fields marked in red before queuing a sweep.");
    return;
  }
  const nlohmann::json base = m_designer->form()->config();
  ui::SweepDialog dialog(base, this);
  if (dialog.exec() != QDialog::Accepted)
    return;
  if (dialog.onSlurm()) {
    submitSlurmSweep(base, dialog.axes(), dialog.slurmResources());
    return;
  }
  try {
    // Each run is named by its values ("mlp-fashion lr=0.02"), so the runs of a sweep tell apart.
    // Stored as a sweep first (definition, members, planned run ids): the Runs tab shows its
    // progress and filters to its runs; `lathe-cli sweep --resume` can finish it.
    std::vector<ui::SweepRun> runs = ui::plan_sweep(base, dialog.axes());
    const std::string sweepId = ui::store_sweep(m_opt.dbPath.toStdString(), base, dialog.axes(), runs);
    for (const ui::SweepRun& run : runs) {
      QStringList list;
      for (const auto& s : run.sets)
        list << QString::fromStdString(s);
      m_queue->enqueue(run.config, list, QString::fromStdString(run.name), QString::fromStdString(run.run_id));
    }
    m_browser->reload();
    statusBar()->showMessage(
        QString("Queued sweep %1: %2 runs").arg(QString::fromStdString(sweepId)).arg(runs.size()), 5000);
    showTab("live");
  } catch (const Error& e) {
    QMessageBox::warning(this, "Sweep", QString::fromUtf8(e.what()));
  }
}

bool MainWindow::submitSlurmSweep(const nlohmann::json& base, const std::vector<ui::SweepAxis>& axes,
                                  const SlurmResources& resources) {
  const auto fail = [this](const QString& text) {
    statusBar()->showMessage("Slurm sweep not submitted: " + text.section('\n', 0, 0), 10000);
    if (m_interactive)
      QMessageBox::warning(this, "Sweep on Slurm", text);
    emit slurmFailed(text);
  };
  QStringList args;
  try {
    // The same definition file and command line a terminal user would write.
    const nlohmann::json def = ui::sweep_definition(base, axes);
    check_slurm_resources(resources);
    const QString folder = QString::fromStdString(resources.out);
    if (!QDir().mkpath(folder))
      throw Error("--out " + resources.out + ": cannot create the folder; allowed: a folder this user can write");
    const std::string defPath = QDir(folder).filePath("sweep-definition.json").toStdString();
    write_file_atomic(defPath, def.dump(2) + "\n");
    const std::vector<std::string> argv = ui::slurm_sweep_args(m_opt.dbPath.toStdString(), defPath, resources);
    for (const std::string& a : argv)
      args << QString::fromStdString(a);
  } catch (const std::exception& e) {
    fail(QString::fromUtf8(e.what()));
    return false;
  }
  if (m_opt.cliPath.isEmpty()) {
    fail("lathe-cli was not found next to this program or on PATH; build it or set LATHE_CLI.");
    return false;
  }
  auto* proc = new QProcess(this);
  connect(proc, &QProcess::finished, this, [this, proc, fail](int code, QProcess::ExitStatus) {
    const QString out = QString::fromUtf8(proc->readAllStandardOutput()).trimmed();
    const QString err = QString::fromUtf8(proc->readAllStandardError()).trimmed();
    proc->deleteLater();
    // --json: the last stdout line is {"sweep", "slurm_job", "folder", "tasks"}.
    const nlohmann::json j = nlohmann::json::parse(out.section('\n', -1).toStdString(), nullptr, false);
    if (code != 0 || !j.is_object() || !j.contains("slurm_job")) {
      fail(QString("lathe-cli sweep --slurm failed (exit %1):\n%2").arg(code).arg(err.isEmpty() ? out : err));
      return;
    }
    const QString sweepId = QString::fromStdString(j.value("sweep", std::string()));
    const QString job = QString::fromStdString(j.value("slurm_job", std::string()));
    const QString folder = QString::fromStdString(j.value("folder", std::string()));
    watchFolder(folder);  // runs and samples arrive as the tasks write them
    m_browser->showSweep(sweepId);  // Cancel sweep acts on the sweep chosen there
    showTab("runs");
    statusBar()->showMessage(QString("Sweep %1 submitted as Slurm job %2 (%3 runs); importing %4 every 3 s")
                                 .arg(sweepId, job)
                                 .arg(j.value("tasks", 0))
                                 .arg(folder),
                             15000);
    emit slurmSubmitted(sweepId, job, folder);
  });
  connect(proc, &QProcess::errorOccurred, this, [proc, fail](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart)
      return;
    fail("cannot start " + proc->program() + ": " + proc->errorString());
    proc->deleteLater();
  });
  statusBar()->showMessage("Submitting the sweep to Slurm...", 5000);
  proc->start(m_opt.cliPath, args);
  return true;
}

void MainWindow::stop() {
  m_queue->stopCurrent();
  statusBar()->showMessage("Stopping: the run finishes its step and saves", 5000);
}

void MainWindow::follow(const QString& runId) {
  if (runId.isEmpty())
    return;
  m_feed->watch(runId);
  if (m_liveOverview && m_liveOverview->runId() != runId)
    m_liveOverview->hide();  // a new run: its charts, until it ends
}

void MainWindow::watch(const QString& runId) {
  if (runId.isEmpty())
    return;
  follow(runId);
  showTab("live");
}

void MainWindow::compareRuns(const QStringList& runIds) {
  m_compare->setRuns(runIds);
  showTab("compare");
}

void MainWindow::exportRuns(const QStringList& runIds) { export_runs(this, m_opt.dbPath, runIds); }

QString MainWindow::modelExportRun() const {
  const QStringList selected = m_browser->selectedRunIds();
  if (selected.size() == 1)
    return selected.front();
  if (m_overview && m_tabs->currentWidget() == m_overview && !m_overview->runId().isEmpty())
    return m_overview->runId();
  if (m_tabs->currentWidget() == m_compare && m_compare->runIds().size() == 1)
    return m_compare->runIds().front();
  return m_feed->watched();
}

void MainWindow::exportModel(const QString& runId) {
  if (!m_interactive) {  // tests, --screenshot: no modal dialogs
    statusBar()->showMessage(runId.isEmpty() ? "Export model: select one run first" : "Export model: " + runId, 8000);
    return;
  }
  export_model(this, m_opt.dbPath, runId);
}

void MainWindow::onRunsChanged(qint64, const QString& newestRunning) {
  m_browser->reload();
  // A run started elsewhere (a terminal, another app) is shown when ours is not running.
  if (!newestRunning.isEmpty() && newestRunning != m_feed->watched() && !m_queue->busy())
    follow(newestRunning);
}

void MainWindow::onRunEnded(const ui::QueuedRun& entry) {
  m_browser->reload();
  m_feed->pollNow();
  updateActions();
  // The Live tab shows what the run produced: every stage's results, events and files.
  if (m_liveOverview && !entry.runId.isEmpty() && entry.runId == m_feed->watched() &&
      m_liveOverview->showRun(entry.runId))
    m_liveOverview->show();
  if (entry.state != ui::QueuedRun::State::failed) {
    statusBar()->showMessage(entry.label + ": " + ui::stateName(entry.state), 8000);
    return;
  }
  const QString err = entry.stderrTail.trimmed().right(2500);
  QString hint = "Read the message above, fix the experiment in the designer and press Run again.";
  if (err.contains("config error"))
    hint = "The config was rejected: fix the named field in the designer and press Run again.";
  else if (err.contains("data error") || err.contains("dataset", Qt::CaseInsensitive) || err.contains("No such file") ||
           err.contains("idx", Qt::CaseInsensitive))
    hint =
        "A data file is missing or damaged (the message names it): fix its path in the Data section; for "
        "Fashion-MNIST install it (apt-get install dataset-fashion-mnist) or set data.path to the folder "
        "holding it.";
  else if (entry.exitCode == -1)
    hint = "lathe-cli crashed; the run stays in the store as interrupted. Re-run it from Runs, and report the crash.";
  statusBar()->showMessage(entry.label + " failed (exit " + QString::number(entry.exitCode) + ")", 10000);
  if (m_interactive && isVisible())
    QMessageBox::warning(
        this, "Run failed: " + entry.label,
        QString("lathe-cli exited with code %1.\n\n%2\n\nWhat to do: %3").arg(entry.exitCode).arg(err, hint));
}

}  // namespace lathe::app
