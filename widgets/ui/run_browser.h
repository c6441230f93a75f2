// RunBrowser: the run history table (RunTableModel) with a name filter, status filter, sweep
// filter (each sweep with its progress), param filter (key=value), paging, and the actions on the selected runs: watch
// live, compare, open the config in the designer, re-run, resume (interrupted or cancelled runs with a checkpoint; also
// on the table's context menu), export (a report; the context menu also exports one run's model as ONNX), delete.
// Actions that need the app (designer, queue, report) are signals; delete is done here after a confirmation. "Parallel
// coordinates" opens a ParallelCoordsPanel under the table over every run of the filter (it follows every change of the
// filter: name, status, sweep, params, search): the runs inside its brushes
// become the selection, on every page (selectedRunIds() is the whole brushed set, so Compare,
// Export, Tags, Re-run and Delete act on all of them; each page shows its brushed rows selected
// and a line says how many are selected and how many on this page); clicking the table replaces
// that selection with the clicked rows. Rows picked in the table are drawn bold there.
#pragma once

#include <QAction>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableView>
#include <QWidget>
#include <nlohmann/json.hpp>

#include "widgets/ui/parallel_coords_panel.h"
#include "widgets/ui/run_table_model.h"

namespace lathe::ui {

class RunBrowser : public QWidget {
  Q_OBJECT
 public:
  explicit RunBrowser(QString dbPath, QWidget* parent = nullptr);

  RunTableModel* model() const { return m_model; }
  QTableView* table() const { return m_table; }
  QPushButton* resumeButton() const { return m_resume; }
  QAction* resumeAction() const { return m_resumeAction; }
  /// The context menu's "Export model (ONNX)...": enabled for one selected run (exportModel).
  QAction* exportModelAction() const { return m_exportModelAction; }
  /// The selection: the brushed runs of parallel coordinates (all pages) while a brush selects
  /// some, else the table's selected rows.
  QStringList selectedRunIds() const;
  /// Selects these runs' rows on the current page (the table's selection; drops a brushed set).
  void selectRuns(const QStringList& ids);
  /// Makes these runs the selection across pages (what a brush does; empty: back to the table's).
  void selectBrushed(const QStringList& ids);
  /// "N runs selected by the brush, M on this page" (hidden without a brushed selection).
  QLabel* selectionLabel() const { return m_selectionLabel; }
  /// Reads the store's config of a run (synchronously; one row).
  nlohmann::json runConfig(const QString& runId) const;
  /// Deletes runs without asking (the Delete button asks first). Returns an error text or "".
  QString deleteRuns(const QStringList& ids);
  /// Sets the note of a run / adds and removes tags on runs (the Note... and Tags... buttons ask
  /// first), then reloads. Returns an error text (a bad tag: the tag and what is allowed) or "".
  QString setNote(const QString& runId, const QString& text);
  QString editTags(const QStringList& runIds, const QStringList& add, const QStringList& remove);
  /// The search box: words are searched in id, name, note and tags; "tag:x" keeps runs tagged x.
  QLineEdit* searchBox() const { return m_search; }
  /// The sweep filter: "all runs", then every sweep of the store ("name  finished/total  state",
  /// the sweep id as item data); choosing one shows only its runs. Re-read by reload().
  QComboBox* sweepFilter() const { return m_sweepFilter; }
  /// Re-reads the sweeps and shows the runs of `sweepId` ("" : all runs).
  void showSweep(const QString& sweepId);
  /// The same for a sweep named as lathe-cli names one: an exact id, a unique id prefix or a
  /// sweep name (`lathe --sweep`). Returns "" or the error (no such sweep, or several match:
  /// the candidates); the filter is left as it was on an error.
  QString showSweepRef(const QString& ref);
  ParallelCoordsPanel* parallelPanel() const { return m_parallel; }
  QPushButton* parallelButton() const { return m_parallelButton; }

 public slots:
  void reload();

 signals:
  void watchRun(const QString& runId);
  /// A row was double-clicked: show that run's overview.
  void showRun(const QString& runId);
  void compareRuns(const QStringList& runIds);
  void openConfig(const nlohmann::json& config, const QString& runId);
  void rerun(const nlohmann::json& config, const QString& runId);
  /// Resume was pressed for an interrupted or cancelled run that has a checkpoint.
  void resumeRun(const QString& runId);
  void exportRuns(const QStringList& runIds);
  /// "Export model (ONNX)..." on one run (the app asks which weights and where).
  void exportModel(const QString& runId);
  void message(const QString& text);

 private:
  void applyFilters();
  void updatePager(qint64 total, const QString& error);
  void updateButtons();
  void reloadSweeps();
  /// Selects the brushed runs that the page shows and updates the selection line.
  void showBrushedOnPage();
  /// Reloads the parallel coordinates when they are shown and the filter's runs are not the ones
  /// they hold (after every filter change, and when they are opened).
  void followFilterInParallel();

  QString m_db;
  RunTableModel* m_model;
  QTableView* m_table;
  QLineEdit *m_nameFilter, *m_paramFilter, *m_search;
  QComboBox* m_statusFilter;
  QComboBox* m_sweepFilter;
  bool m_loadingSweeps = false;
  QLabel* m_pageLabel;
  QPushButton *m_prev, *m_next, *m_watch, *m_compare, *m_open, *m_rerun, *m_resume, *m_export, *m_delete, *m_note,
      *m_tags;
  QPushButton* m_parallelButton;
  ParallelCoordsPanel* m_parallel;
  QAction* m_resumeAction;  ///< the context menu's Resume, enabled like the button
  QAction* m_exportModelAction;
  QStringList m_pendingSelection;
  QStringList m_brushed;             ///< the brushed selection (all pages); empty: the table's rows
  bool m_selectingBrushed = false;   ///< the table's selection is being set from m_brushed
  bool m_resetting = false;          ///< a page is being swapped in (its selection clears)
  QLabel* m_selectionLabel;
};

}  // namespace lathe::ui
