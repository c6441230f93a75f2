// RunTableModel: one page of Store::list_runs() as a Qt table (name, status, started, duration,
// backend, key params, final and best metrics, tags and note; a run's tags and note are every
// cell's tooltip), with a column for each sweep knob that the page's
// run names carry ("mlp-fashion lr=0.02" -> a train.optimizer.lr column). Pages are read on a worker thread with their
// own Store connection (QtConcurrent), so a 10,000-run store never stalls the GUI; sorting maps the clicked column to
// RunQuery::Sort and is done by SQLite, not in memory.
#pragma once

#include <QAbstractTableModel>
#include <QFutureWatcher>
#include <QString>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe::ui {

struct RunRow {
  RunListItem item;
  std::vector<std::pair<std::string, std::string>> params;  ///< the key params and sweep knobs shown
  std::string error;  ///< a failed run's error (its last status event's), the Status cell's tooltip
};

struct RunPageResult {
  std::vector<RunRow> rows;
  /// The sweep knobs of the page's runs (config keys named in "name knob=value" run names), in the
  /// order they first appear: one column each, right after Name.
  std::vector<std::string> knobs;
  int64_t total = 0;
  QString error;
};

class RunTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  explicit RunTableModel(QString dbPath, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
  void sort(int column, Qt::SortOrder order) override;

  RunQuery& query() { return m_query; }
  /// Re-reads the current page (asynchronously; `loaded` follows).
  void reload();
  void setPage(int64_t offset);
  int64_t total() const { return m_total; }
  int64_t offset() const { return m_query.offset; }
  int64_t pageSize() const { return m_query.limit; }
  QString runId(int row) const;
  /// The sweep knob columns of this page (see RunPageResult::knobs).
  const std::vector<std::string>& knobColumns() const { return m_knobs; }
  const RunRow* row(int r) const;
  bool loading() const { return m_watcher.isRunning(); }

  /// Reads one page synchronously (what the worker runs; public for tests).
  static RunPageResult readPage(const QString& dbPath, const RunQuery& query);

 signals:
  void loaded(qint64 total, const QString& error);

 private:
  /// The fixed column (Column enum) a view column shows, -1 for a knob column.
  int baseColumn(int column) const;
  QString m_db;
  RunQuery m_query;
  std::vector<RunRow> m_rows;
  std::vector<std::string> m_knobs;
  int64_t m_total = 0;
  QFutureWatcher<RunPageResult> m_watcher;
  bool m_reloadAgain = false;
};

}  // namespace lathe::ui
