// FolderImporter: follows a Slurm sweep's shared folder from the GUI. Every few seconds it merges
// the folder's per-task store files into the app's store (import_stores, the same code as
// `lathe-cli import`) on a worker thread with its own connection, and says what arrived, so the
// run browser and the live charts show a cluster sweep's runs and samples while they are written.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QTimer>

#include "engine/store/store_import.h"

namespace lathe::ui {

class FolderImporter : public QObject {
  Q_OBJECT
 public:
  explicit FolderImporter(QString dbPath, QObject* parent = nullptr);
  ~FolderImporter() override;

  /// Imports `folder` now and then every `intervalMs` until stop() or another watch().
  void watch(const QString& folder, int intervalMs = 3000);
  void stop();
  QString folder() const { return m_folder; }
  /// One import now unless one is under way (then false).
  bool importNow();
  bool busy() const { return m_watcher.isRunning(); }

 signals:
  /// An import ended: what it added (all zero when nothing was new).
  void imported(int runsAdded, int runsUpdated, qint64 samplesAdded);
  void failed(const QString& text);

 private:
  struct Outcome {
    ImportResult result;
    QString error;
  };
  QString m_db, m_folder;
  QTimer m_timer;
  QFutureWatcher<Outcome> m_watcher;
};

}  // namespace lathe::ui
