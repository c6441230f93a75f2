// StoreTailer and LiveFeed (see store_tailer.h).
#include "widgets/ui/store_tailer.h"

#include <QElapsedTimer>

#include "engine/core/error.h"
#include "engine/store/store.h"

namespace lathe::ui {

StoreTailer::StoreTailer(QString dbPath, int intervalMs, int64_t rawLimit, int buckets)
    : m_dbPath(std::move(dbPath)), m_intervalMs(intervalMs), m_rawLimit(rawLimit), m_buckets(buckets) {}

StoreTailer::~StoreTailer() = default;

void StoreTailer::start() {
  try {
    m_store = std::make_unique<Store>(Store::open(m_dbPath.toStdString()));
  } catch (const std::exception& e) {
    emit failed(QString("Cannot open the run store %1: %2. Choose another file with --db.").arg(m_dbPath, e.what()));
    return;
  }
  m_timer = new QTimer(this);
  m_timer->setInterval(m_intervalMs);
  connect(m_timer, &QTimer::timeout, this, &StoreTailer::poll);
  m_timer->start();
  poll();
}

void StoreTailer::watch(const QString& runId) {
  m_runId = runId;
  m_reset = true;
  m_lastStep.clear();
  m_lastEvent = 0;
  poll();
}

void StoreTailer::pollRuns() {
  RunQuery q;
  q.limit = 20;
  q.with_metrics = {"-"};  // no summaries needed for the fingerprint
  const RunPage page = m_store->list_runs(q);
  std::string fp = std::to_string(page.total);
  QString newestRunning;
  for (const RunListItem& item : page.runs) {
    fp += "|" + item.run.id + ":" + std::string(status_name(item.run.status));
    if (newestRunning.isEmpty() && item.run.status == RunStatus::running)
      newestRunning = QString::fromStdString(item.run.id);
  }
  if (fp != m_runsFingerprint) {
    m_runsFingerprint = fp;
    emit runsChanged(page.total, newestRunning);
  }
}

void StoreTailer::poll() {
  if (!m_store)
    return;
  QElapsedTimer clock;
  clock.start();
  try {
    if (++m_polls % 25 == 0)
      m_store->reap_stale_runs();
    pollRuns();
    if (m_runId.isEmpty())
      return;
    auto batch = std::make_shared<TailBatch>();
    batch->runId = m_runId;
    batch->reset = m_reset;
    const std::string id = m_runId.toStdString();
    if (m_reset) {
      if (!m_store->find_run(id)) {
        emit failed(QString("Run %1 is not in the store %2.").arg(m_runId, m_dbPath));
        m_runId.clear();
        return;
      }
      batch->run = m_store->run(id);
    } else {
      batch->run = m_store->find_run(id);
    }
    for (const MetricSummary& s : m_store->summaries(id)) {
      auto it = m_lastStep.find(s.metric);
      const bool known = it != m_lastStep.end();
      if (known && s.last_step <= it->second)
        continue;
      std::vector<Point> points;
      if (!known && s.count > m_rawLimit)
        points = m_store->downsample(id, s.metric, m_buckets).points();
      else
        points = m_store->series(id, s.metric, known ? it->second + 1 : std::numeric_limits<int64_t>::min());
      if (points.empty())
        continue;
      m_lastStep[s.metric] = points.back().step;
      batch->series.emplace_back(s.metric, std::move(points));
    }
    batch->events = m_store->events(id, m_lastEvent);
    if (!batch->events.empty())
      m_lastEvent = batch->events.back().id;
    batch->readMs = clock.nsecsElapsed() / 1e6;
    m_reset = false;
    emit batchReady(std::move(batch));
  } catch (const std::exception& e) {
    emit failed(QString("Reading the run store failed: %1").arg(e.what()));
  }
}

LiveFeed::LiveFeed(const QString& dbPath, int intervalMs, int64_t rawLimit, int buckets, QObject* parent)
    : QObject(parent), m_tailer(new StoreTailer(dbPath, intervalMs, rawLimit, buckets)) {
  qRegisterMetaType<lathe::ui::TailBatchPtr>("lathe::ui::TailBatchPtr");
  m_tailer->moveToThread(&m_thread);
  connect(&m_thread, &QThread::finished, m_tailer, &QObject::deleteLater);
  connect(m_tailer, &StoreTailer::batchReady, this, &LiveFeed::batchReady, Qt::QueuedConnection);
  connect(m_tailer, &StoreTailer::runsChanged, this, &LiveFeed::runsChanged, Qt::QueuedConnection);
  connect(m_tailer, &StoreTailer::failed, this, &LiveFeed::failed, Qt::QueuedConnection);
  m_thread.setObjectName("lathe-store-tail");
  m_thread.start();
  QMetaObject::invokeMethod(m_tailer, &StoreTailer::start, Qt::QueuedConnection);
}

LiveFeed::~LiveFeed() {
  m_thread.quit();
  m_thread.wait();
}

void LiveFeed::watch(const QString& runId) {
  m_watched = runId;
  QMetaObject::invokeMethod(m_tailer, [t = m_tailer, runId]() { t->watch(runId); }, Qt::QueuedConnection);
}

void LiveFeed::pollNow() { QMetaObject::invokeMethod(m_tailer, &StoreTailer::poll, Qt::QueuedConnection); }

}  // namespace lathe::ui
