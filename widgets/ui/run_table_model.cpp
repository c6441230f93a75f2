// RunTableModel (see run_table_model.h).
#include "widgets/ui/run_table_model.h"

#include <QBrush>
#include <QtConcurrent/QtConcurrent>
#include <cmath>

#include "engine/store/store.h"
#include "widgets/ui/series_math.h"
#include "widgets/ui/sweep.h"

namespace lathe::ui {
namespace {

enum Column {
  kName,
  kStatus,
  kStarted,
  kDuration,
  kBackend,
  kModel,
  kEpochs,
  kTestAccLast,
  kTestAccBest,
  kTrainLossLast,
  kBytes,
  kTags,
  kNote,
  kId,
  kColumns
};
const char* kHeaders[] = {"Name",
                          "Status",
                          "Started",
                          "Duration",
                          "Backend",
                          "Model",
                          "Epochs",
                          "Test acc (final)",
                          "Test acc (best)",
                          "Train loss (final)",
                          "Model bytes",
                          "Tags",
                          "Note",
                          "Id"};
const std::vector<std::string> kKeyParams = {"model.zoo", "train.epochs"};
const std::vector<std::string> kMetrics = {"test/accuracy", "train/loss", "model/bytes"};

QString num(double v) { return std::isfinite(v) ? QString::fromStdString(plain_number(v)) : QString(); }

QString duration(const RunRecord& r) {
  if (!r.started_ms)
    return {};
  const int64_t end = r.finished_ms ? *r.finished_ms : (r.heartbeat_ms ? *r.heartbeat_ms : *r.started_ms);
  const int64_t s = std::max<int64_t>(0, (end - *r.started_ms) / 1000);
  return s < 60 ? QString("%1 s").arg(s) : QString("%1 min %2 s").arg(s / 60).arg(s % 60, 2, 10, QChar('0'));
}

}  // namespace

RunTableModel::RunTableModel(QString dbPath, QObject* parent) : QAbstractTableModel(parent), m_db(std::move(dbPath)) {
  m_query.limit = 100;
  m_query.with_metrics = kMetrics;
  connect(&m_watcher, &QFutureWatcher<RunPageResult>::finished, this, [this]() {
    RunPageResult r = m_watcher.result();
    beginResetModel();
    if (r.error.isEmpty()) {
      m_rows = std::move(r.rows);
      m_knobs = std::move(r.knobs);
      m_total = r.total;
    }
    endResetModel();
    emit loaded(m_total, r.error);
    if (m_reloadAgain) {
      m_reloadAgain = false;
      reload();
    }
  });
}

RunPageResult RunTableModel::readPage(const QString& dbPath, const RunQuery& query) {
  RunPageResult out;
  try {
    Store::OpenOptions opt;
    opt.reap_stale = false;
    Store store = Store::open(dbPath.toStdString(), opt);
    RunPage page = store.list_runs(query);
    out.total = page.total;
    for (auto& item : page.runs) {
      RunRow row;
      const auto knobs = sweep_name_knobs(item.run.name);
      for (auto& [k, v] : store.params(item.run.id)) {
        const bool knob = std::any_of(knobs.begin(), knobs.end(),
                                      [&, key = k](const auto& kv) { return knob_matches(key, kv.first); });
        if (knob && std::find(out.knobs.begin(), out.knobs.end(), k) == out.knobs.end())
          out.knobs.push_back(k);
        if (knob || std::find(kKeyParams.begin(), kKeyParams.end(), k) != kKeyParams.end())
          row.params.emplace_back(k, v);
      }
      if (item.run.status == RunStatus::failed)  // why it failed: hovering "failed" says it
        for (const EventRecord& e : store.events(item.run.id))
          if (e.kind == "status" && e.fields.is_object() && e.fields.value("to", std::string()) == "failed" &&
              e.fields.contains("error") && e.fields["error"].is_string())
            row.error = e.fields["error"].get<std::string>();
      row.item = std::move(item);
      out.rows.push_back(std::move(row));
    }
  } catch (const std::exception& e) {
    out.error = QString::fromUtf8(e.what());
  }
  return out;
}

void RunTableModel::reload() {
  if (m_watcher.isRunning()) {
    m_reloadAgain = true;
    return;
  }
  m_watcher.setFuture(QtConcurrent::run(&RunTableModel::readPage, m_db, m_query));
}

void RunTableModel::setPage(int64_t offset) {
  m_query.offset = std::max<int64_t>(0, offset);
  reload();
}

int RunTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}
int RunTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumns + static_cast<int>(m_knobs.size());
}

int RunTableModel::baseColumn(int column) const {
  const int knobs = static_cast<int>(m_knobs.size());
  if (column <= kName)
    return column;
  if (column <= knobs)
    return -1;  // a knob column
  return column - knobs;
}

QString RunTableModel::runId(int row) const {
  return row >= 0 && row < static_cast<int>(m_rows.size()) ? QString::fromStdString(m_rows[row].item.run.id)
                                                           : QString();
}

const RunRow* RunTableModel::row(int r) const {
  return r >= 0 && r < static_cast<int>(m_rows.size()) ? &m_rows[r] : nullptr;
}

QVariant RunTableModel::data(const QModelIndex& index, int role) const {
  const RunRow* r = row(index.row());
  if (!r)
    return {};
  const RunRecord& run = r->item.run;
  if (role == Qt::ForegroundRole && baseColumn(index.column()) == kStatus) {  // after the sweep knobs' columns
    switch (run.status) {
      case RunStatus::failed:
      case RunStatus::interrupted:
        return QBrush(QColor(183, 28, 28));
      case RunStatus::running:
        return QBrush(QColor(21, 101, 192));
      default:
        return {};
    }
  }
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole)
    return {};
  const QString tags = QString::fromStdString([&] {
    std::string t;
    for (const std::string& tag : run.tags)
      t += (t.empty() ? "" : ", ") + tag;
    return t;
  }());
  if (role == Qt::ToolTipRole && baseColumn(index.column()) == kStatus && !r->error.empty())
    return QString("failed: %1").arg(QString::fromStdString(r->error));
  if (role == Qt::ToolTipRole && (run.note.size() || run.tags.size())) {  // every cell: what was written about the run
    QString tip = QString::fromStdString(run.name);
    if (!tags.isEmpty())
      tip += "\nTags: " + tags;
    if (!run.note.empty())
      tip += "\nNote: " + QString::fromStdString(run.note);
    return tip;
  }
  const auto param = [&](const std::string& key) -> QString {
    for (const auto& [k, v] : r->params)
      if (k == key)
        return QString::fromStdString(v);
    return {};
  };
  const auto metric = [&](const char* name, bool best) -> QString {
    const MetricSummary* s = r->item.metric(name);
    return s ? num(best ? s->best() : s->last) : QString();
  };
  const int column = baseColumn(index.column());
  if (column < 0)
    return param(m_knobs[index.column() - 1]);
  switch (column) {
    case kName:
      return QString::fromStdString(run.name);
    case kStatus:
      return QString::fromStdString(std::string(status_name(run.status)));
    case kStarted:
      return QString::fromStdString(format_local_time(run.started_ms.value_or(run.created_ms)));
    case kDuration:
      return duration(run);
    case kBackend:
      return QString::fromStdString(run.backend);
    case kModel:
      return param("model.zoo");
    case kEpochs:
      return param("train.epochs");
    case kTestAccLast:
      return metric("test/accuracy", false);
    case kTestAccBest:
      return metric("test/accuracy", true);
    case kTrainLossLast:
      return metric("train/loss", false);
    case kBytes:
      return metric("model/bytes", false);
    case kTags:
      return tags;
    case kNote: {  // the first line in the table; all of it in the tooltip
      const QString note = QString::fromStdString(run.note);
      return role == Qt::DisplayRole ? note.section('\n', 0, 0) : note;
    }
    case kId:
      return QString::fromStdString(run.id);
  }
  return {};
}

QVariant RunTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole)
    return {};
  if (orientation == Qt::Vertical)
    return QString::number(m_query.offset + section + 1);
  const int column = baseColumn(section);
  if (column < 0)
    return QString::fromStdString(m_knobs[section - 1]);
  return column >= 0 && column < kColumns ? QString(kHeaders[column]) : QString();
}

void RunTableModel::sort(int column, Qt::SortOrder order) {
  using Sort = RunQuery::Sort;
  m_query.sort_metric.clear();
  switch (baseColumn(column)) {
    case kName:
      m_query.sort = Sort::name;
      break;
    case kStatus:
      m_query.sort = Sort::status;
      break;
    case kStarted:
    case kDuration:
      m_query.sort = Sort::started;
      break;
    case kTestAccLast:
      m_query.sort = Sort::metric_last;
      m_query.sort_metric = "test/accuracy";
      break;
    case kTestAccBest:
      m_query.sort = Sort::metric_best;
      m_query.sort_metric = "test/accuracy";
      break;
    case kTrainLossLast:
      m_query.sort = Sort::metric_last;
      m_query.sort_metric = "train/loss";
      break;
    case kBytes:
      m_query.sort = Sort::metric_last;
      m_query.sort_metric = "model/bytes";
      break;
    default:
      m_query.sort = Sort::created;
  }
  m_query.descending = order == Qt::DescendingOrder;
  m_query.offset = 0;
  reload();
}

}  // namespace lathe::ui
