// ParallelCoordsPanel (see parallel_coords_panel.h).
#include "widgets/ui/parallel_coords_panel.h"

#include <QHBoxLayout>
#include <QMenu>
#include <QMessageBox>
#include <QSignalBlocker>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>
#include <algorithm>
#include <set>
#include <stdexcept>

namespace lathe::ui {

ParallelCoordsPanel::ParallelCoordsPanel(QString dbPath, QWidget* parent) : QWidget(parent), m_db(std::move(dbPath)) {
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(0, 0, 0, 0);
  auto* row = new QHBoxLayout;
  m_prefix = new QLineEdit(this);
  m_prefix->setObjectName("parallelPrefix");
  m_prefix->setPlaceholderText("sweep name prefix (empty: the table's filter)");
  m_load = new QPushButton("Load runs", this);
  m_load->setToolTip("Read every run of the table's filter (all pages), or of the name prefix");
  m_axesButton = new QToolButton(this);
  m_axesButton->setText("Axes");
  m_axesButton->setPopupMode(QToolButton::InstantPopup);
  auto* axesMenu = new QMenu(m_axesButton);
  m_axesButton->setMenu(axesMenu);
  m_left = new QPushButton("Move left", this);
  m_right = new QPushButton("Move right", this);
  m_log = new QCheckBox("Log axis", this);
  m_log->setObjectName("parallelLog");
  m_clear = new QPushButton("Clear brushes", this);
  m_status = new QLabel("Load runs to draw them; drag along an axis to brush it.", this);
  m_status->setObjectName("parallelStatus");
  row->addWidget(m_prefix, 1);
  row->addWidget(m_load);
  row->addWidget(m_axesButton);
  row->addWidget(m_left);
  row->addWidget(m_right);
  row->addWidget(m_log);
  row->addWidget(m_clear);
  column->addLayout(row);
  m_plot = new ParallelCoordsPlot(this);
  m_plot->setModel(&m_model);
  m_plot->setMinimumHeight(220);
  column->addWidget(m_plot, 1);
  column->addWidget(m_status);

  connect(axesMenu, &QMenu::aboutToShow, this, [this, axesMenu]() {
    axesMenu->clear();
    const std::vector<std::string> chosen = axes();
    for (const std::string& name : axisChoices()) {
      QAction* a = axesMenu->addAction(QString::fromStdString(name));
      a->setCheckable(true);
      a->setChecked(std::find(chosen.begin(), chosen.end(), name) != chosen.end());
      connect(a, &QAction::toggled, this, [this, name](bool on) {
        std::vector<std::string> now = axes();
        if (on)
          now.push_back(name);
        else
          now.erase(std::remove(now.begin(), now.end(), name), now.end());
        setAxes(now);
      });
    }
    if (axesMenu->isEmpty())
      axesMenu->addAction("(load runs first)")->setEnabled(false);
  });
  connect(m_load, &QPushButton::clicked, this, &ParallelCoordsPanel::loadRequested);
  connect(m_left, &QPushButton::clicked, this, [this]() { moveCurrentAxis(-1); });
  connect(m_right, &QPushButton::clicked, this, [this]() { moveCurrentAxis(+1); });
  connect(m_clear, &QPushButton::clicked, this, &ParallelCoordsPanel::clearBrushes);
  connect(m_log, &QCheckBox::toggled, this, [this](bool on) {
    const QString why = setCurrentAxisLog(on);
    if (!why.isEmpty()) {
      const QSignalBlocker block(m_log);
      m_log->setChecked(false);
      QMessageBox::information(this, "Log axis", why);
    }
  });
  connect(m_plot, &ParallelCoordsPlot::currentAxisChanged, this, [this](int axis) {
    const QSignalBlocker block(m_log);
    m_log->setChecked(axis >= 0 && m_model.axis(static_cast<size_t>(axis)).log);
  });
  connect(m_plot, &ParallelCoordsPlot::brushChanged, this, [this]() {
    updateStatus();
    emit brushedRuns(brushedRunIds());
  });
  connect(m_plot, &ParallelCoordsPlot::axisMenuRequested, this, &ParallelCoordsPanel::showAxisMenu);
  connect(&m_watcher, &QFutureWatcher<ParallelRuns>::finished, this, [this]() { showRuns(m_watcher.result()); });
}

namespace {
/// `query` as the panel reads it: the name glob replaced by "<prefix>*" when there is a prefix.
RunQuery with_prefix(const RunQuery& query, const QString& prefixText) {
  RunQuery q = query;
  const QString prefix = prefixText.trimmed();
  if (!prefix.isEmpty())
    q.name_glob = prefix.toStdString() + "*";
  return q;
}

bool same_filter(const RunQuery& a, const RunQuery& b) {
  return a.statuses == b.statuses && a.name_glob == b.name_glob && a.params == b.params && a.tags == b.tags &&
         a.sweep == b.sweep && a.search == b.search;
}
}  // namespace

void ParallelCoordsPanel::load(const RunQuery& query) {
  const RunQuery q = with_prefix(query, m_prefix->text());
  m_loadedQuery = q;
  m_status->setText("Reading the runs...");
  m_watcher.setFuture(QtConcurrent::run([db = m_db, q]() { return load_parallel_runs(db, q); }));
}

bool ParallelCoordsPanel::loadedFor(const RunQuery& query) const {
  return m_loadedQuery && same_filter(*m_loadedQuery, with_prefix(query, m_prefix->text()));
}

void ParallelCoordsPanel::showRuns(ParallelRuns runs) {
  const std::vector<std::string> before = axes();
  std::set<std::string> logAxes;
  for (size_t i = 0; i < m_model.axisCount(); ++i)
    if (m_model.axis(i).log)
      logAxes.insert(m_model.axis(i).name);
  const bool hadBrush = m_model.anyBrush();
  m_runs = std::move(runs);
  m_index.clear();
  if (!m_runs.error.isEmpty()) {
    m_model.setRuns({}, {});
    m_plot->rebuild();
    m_status->setText(m_runs.error);
    if (hadBrush)
      emit brushedRuns({});
    emit loaded(m_runs.error);
    return;
  }
  for (size_t i = 0; i < m_runs.ids.size(); ++i)
    m_index.emplace(m_runs.ids[i], i);
  // The axes chosen before, where these runs have them; else the defaults.
  const std::vector<std::string> choices = axisChoices();
  std::vector<std::string> keep;
  for (const std::string& a : before)
    if (std::find(choices.begin(), choices.end(), a) != choices.end())
      keep.push_back(a);
  fill_parallel_model(m_model, m_runs, keep.empty() ? default_parallel_axes(m_runs) : keep);
  for (size_t i = 0; i < m_model.axisCount(); ++i)
    if (logAxes.count(m_model.axis(i).name)) {
      try {
        m_model.setLog(i, true);
      } catch (const std::invalid_argument&) {
        // a value the new runs have cannot go on a log scale: linear
      }
    }
  rebuildModel();
  if (hadBrush)
    emit brushedRuns({});
  emit loaded({});
}

void ParallelCoordsPanel::rebuildModel() {
  m_plot->setCurrentAxis(m_model.axisCount() > 0 ? 0 : -1);
  m_plot->rebuild();
  updateStatus();
}

void ParallelCoordsPanel::setAxes(const std::vector<std::string>& axes) {
  // Brushes and log scales of the axes kept stay.
  std::map<std::string, std::pair<std::optional<std::pair<double, double>>, bool>> kept;
  for (size_t i = 0; i < m_model.axisCount(); ++i)
    kept[m_model.axis(i).name] = {m_model.axis(i).brush, m_model.axis(i).log};
  ParallelCoordsModel next;
  fill_parallel_model(next, m_runs, axes);  // throws before anything changes
  m_model = std::move(next);
  for (size_t i = 0; i < m_model.axisCount(); ++i)
    if (auto it = kept.find(m_model.axis(i).name); it != kept.end()) {
      if (it->second.second)
        m_model.setLog(i, true);
      if (it->second.first)
        m_model.setBrush(i, it->second.first->first, it->second.first->second);
    }
  m_plot->setModel(&m_model);
  m_plot->setCurrentAxis(std::min(m_plot->currentAxis(), static_cast<int>(m_model.axisCount()) - 1));
  m_plot->rebuild();
  updateStatus();
  emit brushedRuns(brushedRunIds());
}

std::vector<std::string> ParallelCoordsPanel::axes() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < m_model.axisCount(); ++i)
    out.push_back(m_model.axis(i).name);
  return out;
}

std::vector<std::string> ParallelCoordsPanel::axisChoices() const {
  std::vector<std::string> out = m_runs.knobs;
  for (const std::string& m : m_runs.metrics)
    for (const std::string& a : metric_axis_names(m))
      out.push_back(a);
  return out;
}

void ParallelCoordsPanel::moveCurrentAxis(int delta) {
  const int from = m_plot->currentAxis();
  const int to = from + delta;
  if (from < 0 || to < 0 || to >= static_cast<int>(m_model.axisCount()))
    return;
  m_model.moveAxis(static_cast<size_t>(from), static_cast<size_t>(to));
  m_plot->setCurrentAxis(to);
  m_plot->rebuild();
}

QString ParallelCoordsPanel::setCurrentAxisLog(bool log) {
  const int axis = m_plot->currentAxis();
  if (axis < 0)
    return "Click an axis first.";
  try {
    m_model.setLog(static_cast<size_t>(axis), log);
  } catch (const std::exception& e) {
    return e.what();
  }
  m_plot->rebuild();
  return {};
}

QStringList ParallelCoordsPanel::brushedRunIds() const {
  QStringList ids;
  if (!m_model.anyBrush())
    return ids;
  ids.reserve(static_cast<int>(m_model.selectedCount()));
  for (size_t r : m_model.selectedRuns())
    ids << QString::fromStdString(m_model.runId(r));
  return ids;
}

void ParallelCoordsPanel::highlightRuns(const QStringList& ids) {
  std::vector<size_t> rows;
  for (const QString& id : ids)
    if (auto it = m_index.find(id.toStdString()); it != m_index.end())
      rows.push_back(it->second);
  m_plot->setHighlighted(rows);
}

void ParallelCoordsPanel::clearBrushes() {
  m_model.clearBrushes();
  m_plot->refreshSelection();
  updateStatus();
  emit brushedRuns({});
}

void ParallelCoordsPanel::updateStatus() {
  if (m_model.runCount() == 0) {
    m_status->setText(m_runs.ids.empty() && m_runs.error.isEmpty() ? "No runs match." : m_status->text());
    return;
  }
  m_status->setText(
      m_model.anyBrush()
          ? QString("%1 of %2 runs inside the brushes (selected in the table where it shows them)")
                .arg(m_model.selectedCount())
                .arg(m_model.runCount())
          : QString("%1 runs; drag along an axis to brush it, click it to clear").arg(m_model.runCount()));
}

void ParallelCoordsPanel::showAxisMenu(int axis, const QPoint& at) {
  QMenu menu;
  menu.addAction("Move left", this, [this]() { moveCurrentAxis(-1); })->setEnabled(axis > 0);
  menu.addAction("Move right", this, [this]() { moveCurrentAxis(+1); })
      ->setEnabled(axis + 1 < static_cast<int>(m_model.axisCount()));
  QAction* log = menu.addAction("Log scale");
  log->setCheckable(true);
  log->setChecked(m_model.axis(static_cast<size_t>(axis)).log);
  connect(log, &QAction::toggled, this, [this](bool on) { m_log->setChecked(on); });
  menu.addAction("Clear brush", this, [this, axis]() {
    m_model.clearBrush(static_cast<size_t>(axis));
    m_plot->refreshSelection();
    updateStatus();
    emit brushedRuns(brushedRunIds());
  });
  menu.addAction("Remove axis", this, [this, axis]() {
    std::vector<std::string> now = axes();
    now.erase(now.begin() + axis);
    setAxes(now);
  });
  menu.exec(at);
}

}  // namespace lathe::ui
