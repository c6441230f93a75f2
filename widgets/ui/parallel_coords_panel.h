// ParallelCoordsPanel: parallel coordinates of all runs of the run browser's filter (every page),
// or of a sweep's runs by name prefix (issue 17 item 3). Axes are chosen knobs (config values,
// numeric or categorical) and metric summaries (last / best); drag along an axis to brush it, and
// the runs inside every brush are selected in the run table (brushedRuns); the table's selection
// is drawn bold on top (highlightRuns). The current axis (the last clicked) moves left / right
// and takes a log scale; the same on an axis's right-click menu. Data: load_parallel_runs on a
// worker thread, ParallelCoordsModel, drawn by ParallelCoordsPlot.
#pragma once

#include <QCheckBox>
#include <QFutureWatcher>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QToolButton>
#include <QWidget>
#include <optional>
#include <unordered_map>

#include "widgets/ui/parallel_coords_data.h"
#include "widgets/ui/parallel_coords_model.h"
#include "widgets/ui/parallel_coords_plot.h"

namespace lathe::ui {

class ParallelCoordsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ParallelCoordsPanel(QString dbPath, QWidget* parent = nullptr);

  /// Reads every run of `query` (its name glob replaced by "<prefix>*" when the prefix box is
  /// filled) on a worker thread; `loaded` follows. The axes chosen and their log scales stay where
  /// the new runs have them; brushes are cleared (brushedRuns({}) when there was one), since their
  /// bands are in units of the old runs' ranges.
  void load(const RunQuery& query);
  /// Whether the last load() read `query`'s filter (statuses, name, params, tags, sweep, search;
  /// not its page or sort) with the prefix box as it is now: the owner skips a reload that
  /// would read the same runs.
  bool loadedFor(const RunQuery& query) const;
  /// Shows runs already read (what load ends in; tests and the bench).
  void showRuns(ParallelRuns runs);
  /// The axes, in order (knob keys, or "last <metric>" / "best <metric>"). Throws
  /// std::invalid_argument for a name the runs do not have.
  void setAxes(const std::vector<std::string>& axes);
  std::vector<std::string> axes() const;
  /// Every axis that can be chosen: the differing knobs, then last / best of every metric.
  std::vector<std::string> axisChoices() const;
  void moveCurrentAxis(int delta);
  /// Log scale on the current axis; returns "" or why not (a category axis, a value <= 0).
  QString setCurrentAxisLog(bool log);
  /// The runs inside every brush (empty when nothing is brushed).
  QStringList brushedRunIds() const;
  /// Draws these runs bold on top (ids not loaded are ignored).
  void highlightRuns(const QStringList& ids);
  void clearBrushes();

  ParallelCoordsModel& model() { return m_model; }
  ParallelCoordsPlot* plot() const { return m_plot; }
  QLineEdit* prefixBox() const { return m_prefix; }
  const ParallelRuns& runs() const { return m_runs; }

 signals:
  void loaded(const QString& error);
  /// After a brush changed: the runs inside every brush (empty: no brush).
  void brushedRuns(const QStringList& ids);
  /// "Load" was pressed: the owner calls load() with its filter.
  void loadRequested();

 private:
  /// Redraws after m_model was filled anew (current axis: the first).
  void rebuildModel();
  void updateStatus();
  void showAxisMenu(int axis, const QPoint& at);

  QString m_db;
  std::optional<RunQuery> m_loadedQuery;  ///< the last load()'s query, prefix applied
  ParallelRuns m_runs;
  ParallelCoordsModel m_model;
  std::unordered_map<std::string, size_t> m_index;  ///< run id -> row of the model
  QFutureWatcher<ParallelRuns> m_watcher;
  ParallelCoordsPlot* m_plot;
  QLineEdit* m_prefix;
  QPushButton *m_load, *m_left, *m_right, *m_clear;
  QToolButton* m_axesButton;
  QCheckBox* m_log;
  QLabel* m_status;
};

}  // namespace lathe::ui
