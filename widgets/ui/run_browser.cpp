// RunBrowser (see run_browser.h).
#include "widgets/ui/run_browser.h"

#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QItemSelectionModel>
#include <QMenu>
#include <QMessageBox>
#include <QRegularExpression>
#include <QSet>
#include <QSplitter>
#include <QVBoxLayout>

#include "engine/core/error.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"
#include "widgets/ui/compare_data.h"
#include "widgets/ui/resume_check.h"

namespace lathe::ui {

RunBrowser::RunBrowser(QString dbPath, QWidget* parent)
    : QWidget(parent), m_db(std::move(dbPath)), m_model(new RunTableModel(m_db, this)) {
  auto* column = new QVBoxLayout(this);
  auto* filters = new QHBoxLayout;
  m_nameFilter = new QLineEdit(this);
  m_nameFilter->setObjectName("nameFilter");
  m_nameFilter->setPlaceholderText("name (glob: cnn*)");
  m_statusFilter = new QComboBox(this);
  m_statusFilter->setObjectName("statusFilter");
  m_statusFilter->addItems({"any status", "running", "finished", "failed", "cancelled", "interrupted", "queued"});
  m_sweepFilter = new QComboBox(this);
  m_sweepFilter->setObjectName("sweepFilter");
  m_sweepFilter->setToolTip("Show the runs of one sweep; each sweep with its progress (finished of total) and state");
  m_sweepFilter->addItem("all runs", QString());
  m_paramFilter = new QLineEdit(this);
  m_paramFilter->setObjectName("paramFilter");
  m_paramFilter->setPlaceholderText("params: model.zoo=cnn train.epochs=5");
  m_search = new QLineEdit(this);
  m_search->setObjectName("searchFilter");
  m_search->setPlaceholderText("search id, name, note, tags; tag:paper");
  m_search->setToolTip(
      "Words: runs whose id, name, note or a tag contains the text (any case). tag:NAME: runs "
      "tagged NAME.");
  m_prev = new QPushButton("<", this);
  m_next = new QPushButton(">", this);
  m_pageLabel = new QLabel(this);
  m_pageLabel->setObjectName("pageLabel");
  filters->addWidget(m_nameFilter, 1);
  filters->addWidget(m_statusFilter);
  filters->addWidget(m_sweepFilter);
  filters->addWidget(m_paramFilter, 2);
  filters->addWidget(m_search, 2);
  filters->addWidget(m_prev);
  filters->addWidget(m_pageLabel);
  filters->addWidget(m_next);
  column->addLayout(filters);

  m_table = new QTableView(this);
  m_table->setModel(m_model);
  m_table->setSortingEnabled(true);
  m_table->horizontalHeader()->setSortIndicator(2, Qt::DescendingOrder);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_table->setAlternatingRowColors(true);
  m_table->verticalHeader()->setDefaultSectionSize(20);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_table);
  m_parallel = new ParallelCoordsPanel(m_db, split);
  m_parallel->setObjectName("parallelPanel");
  m_parallel->setVisible(false);
  split->addWidget(m_parallel);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  column->addWidget(split, 1);

  auto* actions = new QHBoxLayout;
  m_watch = new QPushButton("Watch live", this);
  m_compare = new QPushButton("Compare", this);
  m_compare->setToolTip(QString("Compare 2-%1 selected runs (the Groups tab folds seeds)").arg(kMaxCompareRuns));
  m_open = new QPushButton("Open config", this);
  m_rerun = new QPushButton("Re-run", this);
  m_resume = new QPushButton("Resume", this);
  m_resume->setObjectName("resumeButton");
  m_resumeAction = new QAction("Resume", this);
  m_exportModelAction = new QAction("Export model (ONNX)...", this);
  m_exportModelAction->setObjectName("exportModelAction");
  m_export = new QPushButton("Export...", this);
  m_export->setObjectName("exportButton");
  m_compare->setObjectName("compareButton");
  m_delete = new QPushButton("Delete", this);
  m_note = new QPushButton("Note...", this);
  m_note->setObjectName("noteButton");
  m_tags = new QPushButton("Tags...", this);
  m_tags->setObjectName("tagsButton");
  m_parallelButton = new QPushButton("Parallel coordinates", this);
  m_parallelButton->setObjectName("parallelButton");
  m_parallelButton->setCheckable(true);
  m_parallelButton->setToolTip(
      "Every run of the filter (all pages) as a line over chosen knobs and metrics; "
      "brush an axis to select runs");
  for (QPushButton* b :
       {m_watch, m_compare, m_open, m_rerun, m_resume, m_export, m_note, m_tags, m_delete, m_parallelButton})
    actions->addWidget(b);
  m_selectionLabel = new QLabel(this);
  m_selectionLabel->setObjectName("selectionLabel");
  m_selectionLabel->setToolTip("The runs inside the parallel-coordinates brushes are the selection on every page: "
                               "Compare, Export, Tags, Re-run and Delete act on all of them. Clicking the table "
                               "selects the clicked rows instead.");
  m_selectionLabel->hide();
  actions->addWidget(m_selectionLabel);
  actions->addStretch(1);
  column->addLayout(actions);

  connect(m_nameFilter, &QLineEdit::editingFinished, this, &RunBrowser::applyFilters);
  connect(m_paramFilter, &QLineEdit::editingFinished, this, &RunBrowser::applyFilters);
  connect(m_search, &QLineEdit::editingFinished, this, &RunBrowser::applyFilters);
  connect(m_note, &QPushButton::clicked, this, [this]() {
    const QStringList ids = selectedRunIds();
    if (ids.size() != 1)
      return;
    const RunRow* row = nullptr;
    for (int r = 0; r < m_model->rowCount(); ++r)
      if (m_model->runId(r) == ids.front())
        row = m_model->row(r);
    bool ok = false;
    const QString text =
        QInputDialog::getMultiLineText(this, "Note", "Note on " + ids.front() + " (empty clears it):",
                                       row ? QString::fromStdString(row->item.run.note) : QString(), &ok);
    if (!ok)
      return;
    const QString err = setNote(ids.front(), text);
    if (!err.isEmpty())
      QMessageBox::warning(this, "Note", err);
  });
  connect(m_tags, &QPushButton::clicked, this, [this]() {
    const QStringList ids = selectedRunIds();
    if (ids.isEmpty())
      return;
    bool ok = false;
    const QString text = QInputDialog::getText(
        this, "Tags", QString("Tags for %1 run(s): words add a tag, -word removes it").arg(ids.size()),
        QLineEdit::Normal, QString(), &ok);
    if (!ok)
      return;
    QStringList add, remove;
    for (const QString& w : text.split(QRegularExpression("[\\s,]+"), Qt::SkipEmptyParts))
      (w.startsWith('-') ? remove : add) << (w.startsWith('-') ? w.mid(1) : w);
    const QString err = editTags(ids, add, remove);
    if (!err.isEmpty())
      QMessageBox::warning(this, "Tags", err);
  });
  connect(m_statusFilter, &QComboBox::currentIndexChanged, this, &RunBrowser::applyFilters);
  connect(m_sweepFilter, &QComboBox::currentIndexChanged, this, [this]() {
    if (!m_loadingSweeps)
      applyFilters();
  });
  connect(m_prev, &QPushButton::clicked, this, [this]() { m_model->setPage(m_model->offset() - m_model->pageSize()); });
  connect(m_next, &QPushButton::clicked, this, [this]() { m_model->setPage(m_model->offset() + m_model->pageSize()); });
  connect(m_model, &RunTableModel::loaded, this, &RunBrowser::updatePager);
  connect(m_model, &QAbstractItemModel::modelAboutToBeReset, this, [this]() { m_resetting = true; });
  connect(m_model, &QAbstractItemModel::modelReset, this, [this]() { m_resetting = false; });
  connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this]() {
    // A click in the table replaces a brushed selection; a page swap or our own select does not.
    if (!m_selectingBrushed && !m_resetting && !m_brushed.isEmpty()) {
      m_brushed.clear();
      m_selectionLabel->hide();
    }
    updateButtons();
    // Bold: the rows picked in the table; brushed runs are already the coloured lines.
    if (!m_parallel->isHidden())
      m_parallel->highlightRuns(m_brushed.isEmpty() ? selectedRunIds() : QStringList());
  });
  connect(m_parallelButton, &QPushButton::toggled, this, [this](bool on) {
    m_parallel->setVisible(on);
    if (on)
      followFilterInParallel();
  });
  connect(m_parallel, &ParallelCoordsPanel::loadRequested, this, [this]() { m_parallel->load(m_model->query()); });
  connect(m_parallel, &ParallelCoordsPanel::brushedRuns, this, &RunBrowser::selectBrushed);
  connect(m_table, &QTableView::doubleClicked, this,
          [this](const QModelIndex& i) { emit showRun(m_model->runId(i.row())); });
  connect(m_watch, &QPushButton::clicked, this, [this]() {
    const QStringList ids = selectedRunIds();
    if (!ids.isEmpty())
      emit watchRun(ids.front());
  });
  connect(m_compare, &QPushButton::clicked, this, [this]() { emit compareRuns(selectedRunIds()); });
  connect(m_export, &QPushButton::clicked, this, [this]() { emit exportRuns(selectedRunIds()); });
  connect(m_open, &QPushButton::clicked, this, [this]() {
    const QStringList ids = selectedRunIds();
    if (!ids.isEmpty())
      emit openConfig(runConfig(ids.front()), ids.front());
  });
  connect(m_rerun, &QPushButton::clicked, this, [this]() {
    for (const QString& id : selectedRunIds())
      emit rerun(runConfig(id), id);
  });
  auto resume = [this]() {
    const QStringList ids = selectedRunIds();
    if (check_resumable(m_db, ids).ok)  // the status may have changed since the selection
      emit resumeRun(ids.front());
    else
      updateButtons();
  };
  connect(m_resume, &QPushButton::clicked, this, resume);
  connect(m_resumeAction, &QAction::triggered, this, resume);
  connect(m_exportModelAction, &QAction::triggered, this, [this]() {
    const QStringList ids = selectedRunIds();
    if (ids.size() == 1)
      emit exportModel(ids.front());
  });
  m_table->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(m_table, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    QMenu menu(this);
    menu.setToolTipsVisible(true);
    menu.addAction(m_resumeAction);
    menu.addAction(m_exportModelAction);
    menu.exec(m_table->viewport()->mapToGlobal(at));
  });
  connect(m_delete, &QPushButton::clicked, this, [this]() {
    const QStringList ids = selectedRunIds();
    if (ids.isEmpty())
      return;
    if (QMessageBox::question(this, "Delete runs",
                              QString("Delete %1 run(s) with their samples and artifact files? This cannot be undone.")
                                  .arg(ids.size())) != QMessageBox::Yes)
      return;
    const QString err = deleteRuns(ids);
    if (!err.isEmpty())
      QMessageBox::warning(this, "Delete runs", err);
  });
  updateButtons();
  reload();
}

void RunBrowser::reload() {
  reloadSweeps();
  m_model->reload();
}

void RunBrowser::reloadSweeps() {
  std::vector<SweepRecord> sweeps;
  try {
    Store::OpenOptions opt;
    opt.reap_stale = false;
    if (QFileInfo::exists(m_db))
      sweeps = list_sweeps(Store::open(m_db.toStdString(), opt));
  } catch (const std::exception& e) {
    emit message(QString("Sweeps: ") + e.what());
  }
  const QString chosen = m_sweepFilter->currentData().toString();
  m_loadingSweeps = true;
  m_sweepFilter->clear();
  m_sweepFilter->addItem("all runs", QString());
  for (const SweepRecord& s : sweeps) {
    m_sweepFilter->addItem(QString("%1  %2/%3  %4")
                               .arg(QString::fromStdString(s.name))
                               .arg(s.finished)
                               .arg(s.total)
                               .arg(QString::fromStdString(sweep_state(s))),
                           QString::fromStdString(s.id));
    m_sweepFilter->setItemData(m_sweepFilter->count() - 1,
                               QString("sweep %1: %2 of %3 runs finished, %4 failed or stopped, %5 running")
                                   .arg(QString::fromStdString(s.id))
                                   .arg(s.finished)
                                   .arg(s.total)
                                   .arg(s.failed)
                                   .arg(s.running),
                               Qt::ToolTipRole);
  }
  const int keep = m_sweepFilter->findData(chosen);
  m_sweepFilter->setCurrentIndex(keep < 0 ? 0 : keep);
  m_loadingSweeps = false;
  if (keep < 0 && !chosen.isEmpty())
    applyFilters();  // the chosen sweep is gone
}

void RunBrowser::showSweep(const QString& sweepId) {
  reloadSweeps();
  const int i = m_sweepFilter->findData(sweepId);
  m_sweepFilter->setCurrentIndex(i < 0 ? 0 : i);
}

QString RunBrowser::showSweepRef(const QString& ref) {
  std::string id;
  try {
    if (!QFileInfo::exists(m_db))
      return "no store " + m_db;
    Store::OpenOptions opt;
    opt.reap_stale = false;
    id = find_sweep(Store::open(m_db.toStdString(), opt), ref.toStdString()).id;
  } catch (const std::exception& e) {
    return e.what();
  }
  showSweep(QString::fromStdString(id));
  return {};
}

void RunBrowser::applyFilters() {
  RunQuery& q = m_model->query();
  q.name_glob = m_nameFilter->text().trimmed().toStdString();
  q.statuses.clear();
  if (m_statusFilter->currentIndex() > 0)
    q.statuses.push_back(parse_status(m_statusFilter->currentText().toStdString()));
  q.sweep = m_sweepFilter->currentData().toString().toStdString();
  q.params.clear();
  q.tags.clear();
  QStringList words;
  for (const QString& w : m_search->text().split(' ', Qt::SkipEmptyParts)) {
    if (w.startsWith("tag:") && w.size() > 4)
      q.tags.push_back(w.mid(4).toStdString());
    else
      words << w;
  }
  q.search = words.join(' ').toStdString();
  QStringList bad;
  for (const QString& part : m_paramFilter->text().split(' ', Qt::SkipEmptyParts)) {
    const int eq = part.indexOf('=');
    if (eq <= 0) {
      bad << part;
      continue;
    }
    q.params.emplace_back(part.left(eq).toStdString(), part.mid(eq + 1).toStdString());
  }
  if (!bad.isEmpty())
    emit message("Param filter ignores " + bad.join(", ") + ": write key=value, e.g. model.zoo=cnn");
  q.offset = 0;
  m_model->reload();
  followFilterInParallel();
}

void RunBrowser::followFilterInParallel() {
  // Shown: read the filter's runs now, unless they are what it holds (an editingFinished with the
  // text unchanged, a page or sort change). Hidden: opening it does this.
  if (!m_parallel->isHidden() && !m_parallel->loadedFor(m_model->query()))
    m_parallel->load(m_model->query());
}

void RunBrowser::updatePager(qint64 total, const QString& error) {
  if (!error.isEmpty())
    emit message("Run list: " + error);
  const int64_t from = total == 0 ? 0 : m_model->offset() + 1;
  const int64_t to = std::min<int64_t>(total, m_model->offset() + m_model->rowCount());
  m_pageLabel->setText(QString("%1-%2 of %3").arg(from).arg(to).arg(total));
  // Names and start times cut to "mlp 2 ranks ..." and "2026-12-07 ..." tell runs apart by nothing:
  // those columns grow to their longest entry (up to 360 px); they never shrink under the user.
  for (int c = 0; c < m_model->columnCount(); ++c) {
    const QString header = m_model->headerData(c, Qt::Horizontal, Qt::DisplayRole).toString();
    if (header != "Name" && header != "Started")
      continue;
    const int width = m_table->columnWidth(c);
    m_table->resizeColumnToContents(c);
    m_table->setColumnWidth(c, std::max(width, std::min(360, m_table->columnWidth(c))));
  }
  m_prev->setEnabled(m_model->offset() > 0);
  m_next->setEnabled(to < total);
  if (!m_pendingSelection.isEmpty()) {
    const QStringList ids = m_pendingSelection;
    m_pendingSelection.clear();
    selectRuns(ids);
  }
  if (!m_brushed.isEmpty())
    showBrushedOnPage();  // a new page, sort or filter: its brushed rows selected
  updateButtons();
}

void RunBrowser::updateButtons() {
  const int n = static_cast<int>(selectedRunIds().size());
  m_watch->setEnabled(n == 1);
  m_open->setEnabled(n == 1);
  m_rerun->setEnabled(n >= 1);
  const ResumeCheck resume = check_resumable(m_db, selectedRunIds());
  m_resume->setEnabled(resume.ok);
  m_resume->setToolTip(resume.why);
  m_resumeAction->setEnabled(resume.ok);
  m_resumeAction->setToolTip(resume.why);
  m_compare->setEnabled(n >= 2 && n <= kMaxCompareRuns);
  m_export->setEnabled(n >= 1);
  m_exportModelAction->setEnabled(n == 1);
  m_exportModelAction->setToolTip(n == 1 ? "Write this run's model as ONNX (f32, pruned or INT8 QDQ)"
                                         : "Select one run to export its model");
  m_delete->setEnabled(n >= 1);
  m_note->setEnabled(n == 1);
  m_tags->setEnabled(n >= 1);
}

QStringList RunBrowser::selectedRunIds() const {
  if (!m_brushed.isEmpty())
    return m_brushed;
  QStringList ids;
  for (const QModelIndex& i : m_table->selectionModel()->selectedRows())
    ids << m_model->runId(i.row());
  return ids;
}

void RunBrowser::selectBrushed(const QStringList& ids) {
  m_pendingSelection.clear();
  m_brushed = ids;
  if (ids.isEmpty()) {
    m_selectionLabel->hide();
    m_table->selectionModel()->clearSelection();  // the handler updates the buttons and the bold curves
    updateButtons();
    return;
  }
  if (!m_model->loading())
    showBrushedOnPage();  // else updatePager does it when the page arrives
  updateButtons();
}

void RunBrowser::showBrushedOnPage() {
  const QSet<QString> wanted(m_brushed.begin(), m_brushed.end());
  QItemSelection selection;
  int onPage = 0;
  for (int r = 0; r < m_model->rowCount(); ++r)
    if (wanted.contains(m_model->runId(r))) {
      selection.select(m_model->index(r, 0), m_model->index(r, m_model->columnCount() - 1));
      ++onPage;
    }
  m_selectingBrushed = true;
  m_table->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  m_selectingBrushed = false;
  m_selectionLabel->setText(QString("%1 brushed runs selected (%2 on this page)").arg(m_brushed.size()).arg(onPage));
  m_selectionLabel->show();
}

void RunBrowser::selectRuns(const QStringList& ids) {
  m_brushed.clear();
  m_selectionLabel->hide();
  if (m_model->loading()) {
    m_pendingSelection = ids;
    return;
  }
  // One selection change for the page, not one per row (a brush may select thousands of runs).
  const QSet<QString> wanted(ids.begin(), ids.end());
  QItemSelection selection;
  for (int r = 0; r < m_model->rowCount(); ++r)
    if (wanted.contains(m_model->runId(r)))
      selection.select(m_model->index(r, 0), m_model->index(r, m_model->columnCount() - 1));
  m_table->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

nlohmann::json RunBrowser::runConfig(const QString& runId) const {
  try {
    Store::OpenOptions opt;
    opt.reap_stale = false;
    Store store = Store::open(m_db.toStdString(), opt);
    const auto cfg = nlohmann::json::parse(store.run(runId.toStdString()).config_json, nullptr, false);
    return cfg.is_discarded() ? nlohmann::json::object() : cfg;
  } catch (const std::exception&) {
    return nlohmann::json::object();
  }
}

QString RunBrowser::setNote(const QString& runId, const QString& text) {
  QString err;
  try {
    Store::open(m_db.toStdString()).set_note(runId.toStdString(), text.toStdString());
  } catch (const std::exception& e) {
    err = QString::fromUtf8(e.what());
  }
  reload();
  return err;
}

QString RunBrowser::editTags(const QStringList& runIds, const QStringList& add, const QStringList& remove) {
  std::vector<std::string> a, r;
  for (const QString& t : add)
    a.push_back(t.toStdString());
  for (const QString& t : remove)
    r.push_back(t.toStdString());
  QString err;
  try {
    Store store = Store::open(m_db.toStdString());
    for (const QString& id : runIds) {
      store.add_tags(id.toStdString(), a);
      store.remove_tags(id.toStdString(), r);
    }
  } catch (const std::exception& e) {
    err = QString::fromUtf8(e.what());
  }
  reload();
  return err;
}

QString RunBrowser::deleteRuns(const QStringList& ids) {
  QStringList errors;
  try {
    Store store = Store::open(m_db.toStdString());
    for (const QString& id : ids) {
      try {
        const DeleteResult r = store.delete_run(id.toStdString(), true);
        for (const std::string& f : r.files_failed)
          errors << id + ": " + QString::fromStdString(f);
      } catch (const std::exception& e) {
        errors << id + ": " + e.what();
      }
    }
  } catch (const std::exception& e) {
    errors << e.what();
  }
  reload();
  return errors.isEmpty()
             ? QString()
             : "Some runs or files were not deleted:\n" + errors.join("\n") +
                   "\nStop a running run before deleting it; files that are not provably the run's are kept.";
}

}  // namespace lathe::ui
