// A sweep submitted to Slurm from the GUI (issue 17 item 7): the sweep dialog's Slurm fields are
// checked like lathe-cli's options (the refusal names the option) and make the same `lathe-cli
// sweep DEF --slurm --out ...` command line; the main window runs it, shows the job id or
// sbatch's error, watches the folder and cancels with scancel (fake sbatch / scancel on PATH);
// and, when a local Slurm starts here (tests/support/local_slurm.h), a real job array whose runs
// and samples arrive in the GUI's store while it runs.
#include <gtest/gtest.h>

#include <QDir>
#include <QLineEdit>
#include <QSpinBox>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "app/gui/main_window.h"
#include "engine/core/error.h"
#include "engine/run/config.h"
#include "engine/run/sweep_definition.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"
#include "gui_test_util.h"
#include "tests/support/local_slurm.h"
#include "widgets/ui/sweep.h"
#include "widgets/ui/sweep_dialog.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

/// A small, valid config: one epoch of the student model on 256 images.
nlohmann::json tiny_base() {
  return {{"name", "tiny"},
          {"model", {{"zoo", "student"}}},
          {"train", {{"epochs", 1}, {"threads", 1}}},
          {"data", {{"train_subset", 256}, {"test_subset", 100}}},
          {"output", {{"dir", "runs"}}}};
}

app::WindowOptions window_options(const test::GuiTempDir& dir) {
  app::WindowOptions o;
  o.dbPath = dir.qdb();
  o.cliPath = QString::fromStdString(test::cli_path());
  o.measureCost = false;
  return o;
}

/// Puts `folder` first on PATH for the children (fake sbatch / scancel); restores it when done.
class PathFirst {
 public:
  explicit PathFirst(const std::string& folder) : m_old(qgetenv("PATH")) {
    qputenv("PATH", QByteArray::fromStdString(folder) + ":" + m_old);
  }
  ~PathFirst() { qputenv("PATH", m_old); }

 private:
  QByteArray m_old;
};

void write_script(const fs::path& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
}

/// What the main window's Slurm signals said: (sweep, job, folder) per submission, failure texts.
struct SlurmSignals {
  explicit SlurmSignals(app::MainWindow& w) {
    QObject::connect(&w, &app::MainWindow::slurmSubmitted, [this](const QString& s, const QString& j, const QString& f) {
      submitted.push_back({s, j, f});
    });
    QObject::connect(&w, &app::MainWindow::slurmFailed, [this](const QString& t) { failed.push_back(t); });
  }
  std::vector<QStringList> submitted;
  QStringList failed;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(GuiSweepSlurm, DialogChecksTheFieldsAndMakesTheCliCommand) {
  test::GuiTempDir dir;
  ui::SweepDialog dialog(validate_config(tiny_base()));
  const std::vector<ui::SweepAxis> axes = {{"train.optimizer.lr", {"0.02", "0.05"}}, {"seed", {"1", "2"}}};
  dialog.setAxes(axes);
  ASSERT_TRUE(dialog.acceptable()) << dialog.countLabel()->text().toStdString();
  auto* box = dialog.findChild<QWidget*>("slurmBox");
  ASSERT_NE(box, nullptr);
  EXPECT_TRUE(box->isHidden());  // running here asks for no Slurm fields

  dialog.setOnSlurm(true);
  EXPECT_FALSE(box->isHidden());
  EXPECT_FALSE(dialog.acceptable());  // no folder yet
  EXPECT_TRUE(dialog.slurmError().startsWith("--out: missing")) << dialog.slurmError().toStdString();
  auto* out = dialog.findChild<QLineEdit*>("slurmOut");
  auto* partition = dialog.findChild<QLineEdit*>("slurmPartition");
  auto* time = dialog.findChild<QLineEdit*>("slurmTime");
  auto* gpus = dialog.findChild<QSpinBox*>("slurmGpus");
  auto* cpus = dialog.findChild<QSpinBox*>("slurmCpus");
  ASSERT_TRUE(out && partition && time && gpus && cpus);
  const std::string shared = dir.file("shared");
  out->setText(QString::fromStdString(shared));
  EXPECT_TRUE(dialog.acceptable()) << dialog.slurmError().toStdString();
  EXPECT_TRUE(dialog.countLabel()->text().contains("4 runs will be submitted to Slurm"))
      << dialog.countLabel()->text().toStdString();

  // Refusals, each naming the option and what it takes; OK stays disabled.
  time->setText("ten minutes");
  EXPECT_FALSE(dialog.acceptable());
  EXPECT_TRUE(dialog.slurmError().startsWith("--time 'ten minutes': allowed: Slurm's time limit"))
      << dialog.slurmError().toStdString();
  time->setText("10:00");
  partition->setText("gpu nodes");
  EXPECT_FALSE(dialog.acceptable());
  EXPECT_TRUE(dialog.slurmError().startsWith("--partition 'gpu nodes'")) << dialog.slurmError().toStdString();
  partition->setText("debug");
  cpus->setValue(0);
  EXPECT_FALSE(dialog.acceptable());
  EXPECT_TRUE(dialog.slurmError().startsWith("--cpus 0: allowed: 1 to")) << dialog.slurmError().toStdString();
  cpus->setValue(2);
  gpus->setValue(0);
  out->setText(QString::fromStdString(shared + "/my sweep"));
  EXPECT_FALSE(dialog.acceptable());
  EXPECT_TRUE(dialog.slurmError().startsWith("--out '")) << dialog.slurmError().toStdString();
  out->setText(QString::fromStdString(shared));
  ASSERT_TRUE(dialog.acceptable()) << dialog.slurmError().toStdString();
  EXPECT_TRUE(dialog.slurmError().isEmpty());

  // The command line: the CLI's own options for these values.
  const SlurmResources r = dialog.slurmResources();
  EXPECT_EQ(ui::slurm_sweep_args("/s/lathe.db", "/s/def.json", r),
            (std::vector<std::string>{"--db", "/s/lathe.db", "sweep", "/s/def.json", "--slurm", "--out", shared,
                                      "--partition", "debug", "--time", "10:00", "--gpus", "0", "--cpus", "2",
                                      "--json"}));
  // "From the config" (-1) leaves --gpus / --cpus out; a relative folder becomes absolute.
  gpus->setValue(-1);
  cpus->setValue(-1);
  out->setText("rel/out");
  EXPECT_EQ(dialog.slurmResources().out, QDir::cleanPath(QDir::current().absoluteFilePath("rel/out")).toStdString());
  EXPECT_EQ(ui::slurm_sweep_args("db", "def", dialog.slurmResources()).size(), 12u);  // --partition and --time stay
  // The definition plans to the same runs as the queued sweep would (names aside: knob order).
  const nlohmann::json def = ui::sweep_definition(validate_config(tiny_base()), dialog.axes());
  const SweepPlan plan = plan_sweep_definition(def, dir.file(""));
  std::set<std::string> fromDefinition, fromQueue;
  for (const SweepMember& m : plan.members) {
    nlohmann::json c = m.config;
    c.erase("name");
    fromDefinition.insert(c.dump());
  }
  for (const ui::SweepRun& run : ui::plan_sweep(validate_config(tiny_base()), dialog.axes())) {
    nlohmann::json c = run.config;
    for (const std::string& s : run.sets)
      apply_override(c, s);
    c = validate_config(c);
    c.erase("name");
    fromQueue.insert(c.dump());
  }
  EXPECT_EQ(fromDefinition.size(), 4u);
  EXPECT_EQ(fromDefinition, fromQueue);
  EXPECT_THROW(ui::slurm_sweep_args("db", "def", SlurmResources{}), ConfigError);  // no folder

  // Back to this machine: the Slurm fields no longer matter.
  time->setText("soon");
  EXPECT_FALSE(dialog.acceptable());
  dialog.setOnSlurm(false);
  EXPECT_TRUE(dialog.acceptable());
  EXPECT_TRUE(dialog.countLabel()->text().contains("4 runs will be queued"));
}

// The main window's submission with fake sbatch / scancel: the job id it printed lands in the
// store and the status bar, the folder is watched, the Runs tab shows the sweep, Cancel sweep runs
// scancel on the job; sbatch's error comes back as the failure text.
TEST(GuiSweepSlurm, MainWindowSubmitsShowsTheJobAndCancels) {
  test::GuiTempDir dir;
  const fs::path bin = dir.file("bin");
  fs::create_directories(bin);
  const fs::path calls = dir.file("calls.txt");
  write_script(bin / "sbatch", "echo \"sbatch $*\" >> " + calls.string() + "\necho 4242\n");
  write_script(bin / "scancel", "echo \"scancel $*\" >> " + calls.string() + "\n");
  PathFirst path(bin.string());

  app::MainWindow w(window_options(dir));
  w.setInteractive(false);
  SlurmSignals sig(w);
  std::vector<QStringList>& submitted = sig.submitted;
  QStringList& failed = sig.failed;
  const std::string shared = dir.file("shared");
  SlurmResources r;
  r.out = shared;
  r.time = "10:00";
  r.cpus = 1;
  ASSERT_TRUE(w.submitSlurmSweep(tiny_base(), {{"seed", {"1", "2", "3"}}}, r));
  ASSERT_TRUE(test::wait_until([&]() { return submitted.size() + failed.size() > 0; }, 30000));
  ASSERT_EQ(failed.size(), 0) << failed.at(0).toStdString();
  const QString sweepId = submitted.at(0).at(0);
  EXPECT_EQ(submitted.at(0).at(1), "4242");
  EXPECT_EQ(submitted.at(0).at(2).toStdString(), shared);
  EXPECT_EQ(w.importer()->folder().toStdString(), shared);  // watched: runs merge as they arrive
  EXPECT_EQ(w.browser()->sweepFilter()->currentData().toString(), sweepId);
  EXPECT_TRUE(w.tabs()->currentWidget() == w.browser());
  EXPECT_NE(read_text(calls).find("sbatch --parsable " + shared + "/sweep.sbatch"), std::string::npos)
      << read_text(calls);
  const std::string script = read_text(fs::path(shared) / "sweep.sbatch");
  EXPECT_NE(script.find("#SBATCH --array=0-2"), std::string::npos) << script;
  EXPECT_NE(script.find("#SBATCH --time=10:00"), std::string::npos) << script;
  EXPECT_NE(script.find("#SBATCH --cpus-per-task=1"), std::string::npos) << script;
  EXPECT_TRUE(fs::exists(fs::path(shared) / "sweep-definition.json"));
  {
    Store s = Store::open(dir.db(), Store::read_only_options());
    const SweepRecord rec = find_sweep(s, sweepId.toStdString());
    EXPECT_EQ(rec.slurm_job, "4242");
    EXPECT_EQ(rec.total, 3);
  }

  // Cancel sweep: scancel of the job, the sweep cancelled.
  w.cancelSweep(sweepId);
  ASSERT_TRUE(test::wait_until(
      [&]() {
        return find_sweep(Store::open(dir.db(), Store::read_only_options()), sweepId.toStdString()).status ==
               "cancelled";
      },
      30000));
  EXPECT_NE(read_text(calls).find("scancel 4242"), std::string::npos) << read_text(calls);

  // sbatch refuses: its message is the failure text; a bad field is refused before any child.
  write_script(bin / "sbatch", "echo 'sbatch: error: invalid partition specified: nope' >&2\nexit 1\n");
  r.partition = "nope";
  ASSERT_TRUE(w.submitSlurmSweep(tiny_base(), {{"seed", {"1", "2"}}}, r));
  ASSERT_TRUE(test::wait_until([&]() { return failed.size() > 0; }, 30000));
  EXPECT_TRUE(failed.at(0).contains("invalid partition specified: nope"))
      << failed.at(0).toStdString();
  r.time = "ten";
  EXPECT_FALSE(w.submitSlurmSweep(tiny_base(), {{"seed", {"1"}}}, r));
  ASSERT_EQ(failed.size(), 2);
  EXPECT_TRUE(failed.at(1).startsWith("--time 'ten'")) << failed.at(1).toStdString();
  EXPECT_EQ(submitted.size(), 1u);
}

// The real thing: a 3-run sweep submitted from the main window to a local Slurm; runs arrive in the
// GUI's store (the folder watch) while the job runs, and at the end every run and sample is there.
TEST(GuiSweepSlurm, LocalSlurmSweepArrivesLiveInTheGui) {
  if (!test::fashion_mnist_present())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  test::GuiTempDir dir;
  test::LocalSlurm slurm(dir.file("slurm"));
  if (!slurm.ok())
    GTEST_SKIP() << "no local Slurm: " << slurm.reason();
  const QByteArray oldConf = qgetenv("SLURM_CONF");
  qputenv("SLURM_CONF", QByteArray::fromStdString(dir.file("slurm") + "/slurm.conf"));

  app::MainWindow w(window_options(dir));
  w.setInteractive(false);
  SlurmSignals sig(w);
  std::vector<QStringList>& submitted = sig.submitted;
  QStringList& failed = sig.failed;
  SlurmResources r;
  r.out = dir.file("shared");
  r.cpus = 1;
  r.time = "10:00";
  nlohmann::json base = tiny_base();
  base["train"]["epochs"] = 3;  // long enough to be seen running
  ASSERT_TRUE(w.submitSlurmSweep(base, {{"seed", {"1", "2", "3"}}}, r));
  ASSERT_TRUE(test::wait_until([&]() { return submitted.size() + failed.size() > 0; }, 60000));
  ASSERT_EQ(failed.size(), 0) << failed.at(0).toStdString();
  const std::string sweepId = submitted.at(0).at(0).toStdString();
  const std::string job = submitted.at(0).at(1).toStdString();
  // The window watches the folder every 3 s; these runs take seconds, so follow it more often here.
  ASSERT_EQ(w.importer()->folder().toStdString(), r.out);
  w.importer()->watch(w.importer()->folder(), 500);

  int seenWhileRunning = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(400);
  while (!slurm.job_done(job) && std::chrono::steady_clock::now() < deadline) {
    test::wait_until([]() { return false; }, 500);
    if (!slurm.job_done(job))
      seenWhileRunning = std::max<int>(seenWhileRunning, static_cast<int>(w.browser()->model()->total()));
  }
  ASSERT_TRUE(slurm.job_done(job)) << "the job did not finish in 400 s";
  EXPECT_GT(seenWhileRunning, 0) << "no run reached the GUI's store while the job ran";
  // The last import after the job: every member finished, every sample of the task stores here.
  test::wait_until([&]() { return !w.importer()->busy(); }, 30000);
  ASSERT_TRUE(w.importer()->importNow());
  test::wait_until([&]() { return !w.importer()->busy(); }, 60000);
  Store s = Store::open(dir.db(), Store::read_only_options());
  EXPECT_EQ(find_sweep(s, sweepId).finished, 3);
  int64_t inTasks = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir.file("shared") + "/stores"))
    if (e.path().extension() == ".db")
      inTasks += sql::Db(e.path().string()).query_int("SELECT count(*) FROM samples").value_or(0);
  EXPECT_GT(inTasks, 0);
  EXPECT_EQ(s.db().query_int("SELECT count(*) FROM samples"), inTasks);
  EXPECT_TRUE(test::wait_until([&]() { return w.browser()->model()->total() == 3; }, 10000));
  qputenv("SLURM_CONF", oldConf);
}

}  // namespace
}  // namespace lathe
