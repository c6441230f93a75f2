// FolderImporter (see folder_importer.h).
#include "widgets/ui/folder_importer.h"

#include <QtConcurrent/QtConcurrent>

#include "engine/store/store.h"

namespace lathe::ui {

FolderImporter::FolderImporter(QString dbPath, QObject* parent) : QObject(parent), m_db(std::move(dbPath)) {
  connect(&m_timer, &QTimer::timeout, this, [this]() { importNow(); });
  connect(&m_watcher, &QFutureWatcher<Outcome>::finished, this, [this]() {
    const Outcome o = m_watcher.result();
    if (!o.error.isEmpty())
      emit failed("Import of " + m_folder + ": " + o.error);
    else
      emit imported(o.result.runs_added, o.result.runs_updated, o.result.samples_added);
  });
}

FolderImporter::~FolderImporter() {
  m_timer.stop();
  m_watcher.waitForFinished();
}

void FolderImporter::watch(const QString& folder, int intervalMs) {
  m_folder = folder;
  m_timer.start(intervalMs);
  importNow();
}

void FolderImporter::stop() {
  m_timer.stop();
  m_folder.clear();
}

bool FolderImporter::importNow() {
  if (m_folder.isEmpty() || m_watcher.isRunning())
    return false;
  const std::string db = m_db.toStdString(), folder = m_folder.toStdString();
  m_watcher.setFuture(QtConcurrent::run([db, folder]() {
    Outcome o;
    try {
      Store store = Store::open(db);
      o.result = import_stores(store, folder);
    } catch (const std::exception& e) {
      o.error = QString::fromUtf8(e.what());
    }
    return o;
  }));
  return true;
}

}  // namespace lathe::ui
