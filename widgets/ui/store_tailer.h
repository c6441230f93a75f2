// StoreTailer: the GUI's reader of the run store, living on its own QThread with its own Store
// connection (WAL lets it read while lathe-cli writes). Every interval (200 ms: 5 reads a second)
// it reads what is new for the watched run (samples past the last step seen, events past the last
// id, the run row) and whether the run list changed, and hands that over as one immutable batch
// through a queued signal. The GUI thread only appends the batch to its charts, so store reads
// never block it. LiveFeed owns the thread and is what widgets talk to.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>
#include <QTimer>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe {
class Store;
}

namespace lathe::ui {

struct TailBatch {
  QString runId;
  bool reset = false;                  ///< first batch of a newly watched run: clear what is shown
  std::optional<RunRecord> run;        ///< the run row (config_json only in the reset batch)
  std::vector<std::pair<std::string, std::vector<Point>>> series;  ///< new points per metric
  std::vector<EventRecord> events;     ///< new events
  double readMs = 0;                   ///< time this poll spent reading the store (worker thread)
};
using TailBatchPtr = std::shared_ptr<const TailBatch>;

class StoreTailer : public QObject {
  Q_OBJECT
 public:
  /// Series longer than rawLimit points are first read downsampled (min/max preserved) into
  /// `buckets` buckets, then tailed raw.
  StoreTailer(QString dbPath, int intervalMs, int64_t rawLimit, int buckets);
  ~StoreTailer() override;

 public slots:
  void start();
  void watch(const QString& runId);
  void poll();

 signals:
  void batchReady(lathe::ui::TailBatchPtr batch);
  /// The run list changed (a run was added, deleted or changed status). newestRunning: the most
  /// recently created running run, "" when none.
  void runsChanged(qint64 total, const QString& newestRunning);
  void failed(const QString& message);

 private:
  void pollRuns();
  QString m_dbPath;
  int m_intervalMs;
  int64_t m_rawLimit;
  int m_buckets;
  std::unique_ptr<Store> m_store;
  QTimer* m_timer = nullptr;
  QString m_runId;
  bool m_reset = false;
  std::map<std::string, int64_t> m_lastStep;
  int64_t m_lastEvent = 0;
  std::string m_runsFingerprint;
  int m_polls = 0;
};

/// Owns a StoreTailer and its thread. Everything here is called from the GUI thread.
class LiveFeed : public QObject {
  Q_OBJECT
 public:
  explicit LiveFeed(const QString& dbPath, int intervalMs = 200, int64_t rawLimit = 250'000, int buckets = 20'000,
                    QObject* parent = nullptr);
  ~LiveFeed() override;
  void watch(const QString& runId);
  QString watched() const { return m_watched; }
  void pollNow();

 signals:
  void batchReady(lathe::ui::TailBatchPtr batch);
  void runsChanged(qint64 total, const QString& newestRunning);
  void failed(const QString& message);

 private:
  QThread m_thread;
  StoreTailer* m_tailer;
  QString m_watched;
};

}  // namespace lathe::ui

Q_DECLARE_METATYPE(lathe::ui::TailBatchPtr)
