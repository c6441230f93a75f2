// RunQueue (see run_queue.h).
#include "widgets/ui/run_queue.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QFile>

namespace lathe::ui {

QString stateName(QueuedRun::State s) {
  switch (s) {
    case QueuedRun::State::queued:
      return "queued";
    case QueuedRun::State::running:
      return "running";
    case QueuedRun::State::finished:
      return "finished";
    case QueuedRun::State::failed:
      return "failed";
    case QueuedRun::State::cancelled:
      return "cancelled";
  }
  return "?";
}

RunQueue::RunQueue(QString cliPath, QString dbPath, QObject* parent)
    : QObject(parent), m_cli(std::move(cliPath)), m_db(std::move(dbPath)) {}

RunQueue::~RunQueue() {
  if (m_process) {
    m_process->disconnect(this);
    m_process->terminate();
    if (!m_process->waitForFinished(5000))
      m_process->kill();
    m_process->waitForFinished(2000);
  }
}

int RunQueue::enqueue(const nlohmann::json& config, const QStringList& sets, const QString& label, const QString& runId) {
  QueuedRun e;
  e.id = m_nextId++;
  e.sets = sets;
  e.runId = runId;
  const QString name = QString::fromStdString(config.value("name", std::string("experiment")));
  e.label = label.isEmpty() ? (sets.isEmpty() ? name : name + " [" + sets.join(", ") + "]") : label;
  e.configPath = m_configs.filePath(QString("run-%1.json").arg(e.id));
  QFile f(e.configPath);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
    e.state = QueuedRun::State::failed;
    e.stderrTail = "cannot write " + e.configPath + ": " + f.errorString();
    m_entries.push_back(e);
    emit changed();
    emit runEnded(m_entries.back());
    return e.id;
  }
  f.write(QByteArray::fromStdString(config.dump(2)));
  f.close();
  m_entries.push_back(e);
  emit changed();
  if (!m_process)
    startNext();
  return e.id;
}

int RunQueue::enqueueResume(const QString& runId, const QString& label) {
  QueuedRun e;
  e.id = m_nextId++;
  e.resume = true;
  e.runId = runId;
  e.label = label.isEmpty() ? "resume " + runId.left(8) : label;
  m_entries.push_back(e);
  emit changed();
  if (!m_process)
    startNext();
  return e.id;
}

QueuedRun* RunQueue::entry(int id) {
  for (auto& e : m_entries)
    if (e.id == id)
      return &e;
  return nullptr;
}

const QueuedRun* RunQueue::current() const {
  for (const auto& e : m_entries)
    if (e.id == m_currentId && e.state == QueuedRun::State::running)
      return &e;
  return nullptr;
}

int RunQueue::pending() const {
  int n = 0;
  for (const auto& e : m_entries)
    n += e.state == QueuedRun::State::queued;
  return n;
}

void RunQueue::startNext() {
  QueuedRun* next = nullptr;
  for (auto& e : m_entries)
    if (e.state == QueuedRun::State::queued) {
      next = &e;
      break;
    }
  if (!next)
    return;
  m_currentId = next->id;
  next->state = QueuedRun::State::running;
  m_stopRequested = false;
  m_stdoutBuffer.clear();
  QStringList args{"--db", m_db};
  if (next->resume)
    args << "resume" << next->runId << "--json";
  else
    args << "run" << next->configPath << "--json";
  if (!next->resume && !next->runId.isEmpty())
    args << "--run-id" << next->runId;
  for (const QString& s : next->sets)
    args << "--set" << s;
  m_process = new QProcess(this);
  m_process->setProgram(m_cli);
  m_process->setArguments(args);
  connect(m_process, &QProcess::readyReadStandardOutput, this, &RunQueue::onStdout);
  connect(m_process, &QProcess::readyReadStandardError, this, [this]() {
    if (QueuedRun* e = entry(m_currentId)) {
      e->stderrTail += QString::fromUtf8(m_process->readAllStandardError());
      if (e->stderrTail.size() > 8000)
        e->stderrTail = e->stderrTail.right(8000);
    }
  });
  connect(m_process, &QProcess::finished, this, &RunQueue::onFinished);
  connect(m_process, &QProcess::errorOccurred, this, [this](QProcess::ProcessError err) {
    if (err == QProcess::FailedToStart)
      onFinished(-1, QProcess::CrashExit);
  });
  if (next->resume)  // the run exists already: the Live tab can follow it from the start
    connect(m_process, &QProcess::started, this, [this]() {
      if (QueuedRun* e = entry(m_currentId)) {
        e->announced = true;
        emit runStarted(e->runId, e->label);
      }
    });
  emit changed();
  m_process->start();
}

void RunQueue::onStdout() {
  m_stdoutBuffer += m_process->readAllStandardOutput();
  int nl;
  while ((nl = m_stdoutBuffer.indexOf('\n')) >= 0) {
    const QByteArray line = m_stdoutBuffer.left(nl);
    m_stdoutBuffer.remove(0, nl + 1);
    if (!line.contains("\"started\""))
      continue;
    const auto j = nlohmann::json::parse(line.toStdString(), nullptr, false);
    if (j.is_discarded() || j.value("event", std::string()) != "started")
      continue;
    QueuedRun* e = entry(m_currentId);
    if (e && !e->announced) {
      e->announced = true;
      if (e->runId.isEmpty())
        e->runId = QString::fromStdString(j.value("run_id", std::string()));
      emit runStarted(e->runId, e->label);
      emit changed();
    }
  }
}

void RunQueue::onFinished(int exitCode, QProcess::ExitStatus status) {
  QProcess* proc = m_process;
  if (!proc)
    return;
  m_process = nullptr;
  proc->disconnect(this);
  QueuedRun* e = entry(m_currentId);
  if (e) {
    e->stderrTail += QString::fromUtf8(proc->readAllStandardError());
    if (status == QProcess::CrashExit && exitCode != -1)
      e->stderrTail += QString("\n(lathe-cli crashed: %1)").arg(proc->errorString());
    if (exitCode == -1 && proc->error() == QProcess::FailedToStart)
      e->stderrTail = QString(
                          "could not start %1: %2. Build lathe-cli (cmake --build build --target lathe-cli) "
                          "or put it next to the lathe binary.")
                          .arg(m_cli, proc->errorString());
    e->exitCode = status == QProcess::CrashExit ? -1 : exitCode;
    if (e->exitCode == 0)
      e->state = m_stopRequested ? QueuedRun::State::cancelled : QueuedRun::State::finished;
    else if (m_stopRequested && status == QProcess::NormalExit)
      e->state = QueuedRun::State::cancelled;
    else
      e->state = QueuedRun::State::failed;
    emit runEnded(*e);
  }
  proc->deleteLater();
  emit changed();
  startNext();
}

void RunQueue::stopCurrent() {
  if (!m_process)
    return;
  m_stopRequested = true;
  m_process->terminate();
}

void RunQueue::clearPending() {
  std::erase_if(m_entries, [](const QueuedRun& e) { return e.state == QueuedRun::State::queued; });
  emit changed();
}

bool RunQueue::waitIdle(int msecs) {
  QDeadlineTimer deadline(msecs);
  while ((m_process || pending() > 0) && !deadline.hasExpired())
    QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
  return !m_process && pending() == 0;
}

}  // namespace lathe::ui
