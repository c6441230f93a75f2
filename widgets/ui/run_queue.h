// RunQueue: runs experiments the way DESIGN.md's process model says, as `lathe-cli run CONFIG
// --db STORE --json [--set k=v]...` child processes, one at a time, in order. The GUI never links
// the trainer: a crashing run ends its child, not the app. Stop sends SIGTERM (the runner finishes
// the step, saves and marks the run cancelled). A resume entry runs `lathe-cli --db STORE resume RUN
// --json` the same way (its run id is known from the start). Each entry remembers its state, exit
// code and the tail of its stderr, so a failed run can say why.
#pragma once

#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <nlohmann/json.hpp>
#include <vector>

namespace lathe::ui {

struct QueuedRun {
  enum class State { queued, running, finished, failed, cancelled };
  int id = 0;
  QString label;
  QString configPath;   ///< the config written for this run
  QStringList sets;     ///< --set assignments (a sweep point)
  bool resume = false;  ///< `lathe-cli resume runId` instead of `run configPath`
  State state = State::queued;
  QString runId;  ///< from the child's "started" event (a resume entry: the run it continues; a
                  ///< stored sweep's member: given at enqueue)
  bool announced = false;  ///< runStarted was emitted for it
  int exitCode = 0;
  QString stderrTail;
};
QString stateName(QueuedRun::State s);

class RunQueue : public QObject {
  Q_OBJECT
 public:
  RunQueue(QString cliPath, QString dbPath, QObject* parent = nullptr);
  ~RunQueue() override;

  /// Queues `config` (written to a file now) with optional --set assignments; starts it when the
  /// queue is idle. `runId`: the id the run gets (`--run-id`, a stored sweep's member planned
  /// ahead); "" : the child makes one. Returns the entry id.
  int enqueue(const nlohmann::json& config, const QStringList& sets = {}, const QString& label = {},
              const QString& runId = {});
  /// Queues `lathe-cli resume runId` (an interrupted or cancelled run with a checkpoint); runStarted
  /// is emitted with that id when the child starts. Returns the entry id.
  int enqueueResume(const QString& runId, const QString& label = {});
  /// SIGTERM to the running child (it stops after the current step).
  void stopCurrent();
  /// Drops entries that have not started.
  void clearPending();
  bool busy() const { return m_process != nullptr; }
  int pending() const;
  const std::vector<QueuedRun>& entries() const { return m_entries; }
  const QueuedRun* current() const;
  QString cliPath() const { return m_cli; }
  /// Waits (processing events) until the queue is idle or msecs pass; for tests and --screenshot.
  bool waitIdle(int msecs);

 signals:
  void changed();
  /// The child reported its run id (the run now exists in the store).
  void runStarted(const QString& runId, const QString& label);
  /// exitCode 0 finished, 130/143 stopped, else failed (stderr tail says why).
  void runEnded(const QueuedRun& entry);

 private:
  void startNext();
  void onStdout();
  void onFinished(int exitCode, QProcess::ExitStatus status);
  QueuedRun* entry(int id);

  QString m_cli, m_db;
  QTemporaryDir m_configs;
  std::vector<QueuedRun> m_entries;
  QProcess* m_process = nullptr;
  int m_currentId = 0, m_nextId = 1;
  QByteArray m_stdoutBuffer;
  bool m_stopRequested = false;
};

}  // namespace lathe::ui
