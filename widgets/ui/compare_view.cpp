// CompareView (see compare_view.h).
#include "widgets/ui/compare_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QMessageBox>
#include <QToolTip>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "engine/store/store_types.h"
#include "widgets/common/chart_palette.h"
#include "widgets/common/contention.h"
#include "widgets/ui/series_math.h"

namespace lathe::ui {
namespace {

/// Series with at most this many points are drawn with a marker on every point.
constexpr int kMarkedPoints = 30;

QString num(double v) { return std::isfinite(v) ? QString::fromStdString(plain_number(v, 5)) : QString("-"); }

QTableWidgetItem* cell(const QString& text) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(item->flags() & ~Qt::ItemIsEditable);
  return item;
}

/// Moves the legend out of the plot into a column on its right, so it never hides a run's points.
void legendBesidePlot(QCustomPlot* plot) {
  plot->axisRect()->insetLayout()->take(plot->legend);
  auto* side = new QCPLayoutGrid;  // legend on top, an empty filler below takes the remaining height
  plot->plotLayout()->addElement(0, 1, side);
  side->addElement(0, 0, plot->legend);
  side->addElement(1, 0, new QCPLayoutElement(plot));
  side->setRowStretchFactor(0, 0.001);
  plot->plotLayout()->setColumnStretchFactor(1, 0.001);
  plot->legend->setBorderPen(Qt::NoPen);
}

}  // namespace

CompareView::CompareView(QString dbPath, QWidget* parent) : QWidget(parent), m_db(std::move(dbPath)) {
  auto* column = new QVBoxLayout(this);
  m_header = new QLabel("Select 2-100 runs in Runs and press Compare.", this);
  m_header->setObjectName("compareHeader");
  m_header->setWordWrap(true);
  column->addWidget(m_header);
  m_tabs = new QTabWidget(this);
  column->addWidget(m_tabs, 1);

  auto* configPage = new QWidget(this);
  auto* configLayout = new QVBoxLayout(configPage);
  m_onlyDiff = new QCheckBox("Only differences", configPage);
  m_onlyDiff->setObjectName("onlyDifferences");
  m_onlyDiff->setChecked(true);
  m_config = new QTableWidget(configPage);
  m_config->setObjectName("configDiff");
  configLayout->addWidget(m_onlyDiff);
  configLayout->addWidget(m_config, 1);
  m_tabs->addTab(configPage, "Config");

  m_metrics = new QTableWidget(this);
  m_metrics->setObjectName("metricSummary");
  m_tabs->addTab(m_metrics, "Metrics");

  auto* curvePage = new QWidget(this);
  auto* curveLayout = new QVBoxLayout(curvePage);
  m_curveMetric = new QComboBox(curvePage);
  m_curveMetric->setObjectName("curveMetric");
  auto* curveRow = new QHBoxLayout;
  curveRow->addWidget(new QLabel("Metric:", curvePage));
  curveRow->addWidget(m_curveMetric, 1);
  m_curveX = new QComboBox(curvePage);
  m_curveX->setObjectName("curveX");
  m_curveX->setToolTip(
      "The x axis: the step, the epoch (each run's steps over its own steps per epoch: runs on 1 and 2 ranks "
      "line up), or any metric (each sample paired with that metric's value at its step)");
  curveRow->addWidget(new QLabel("x:", curvePage));
  curveRow->addWidget(m_curveX, 1);
  curveLayout->addLayout(curveRow);
  m_curves = new QCustomPlot(curvePage);
  m_curves->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_curves->legend->setVisible(true);
  m_curves->legend->setFont(QFont("sans", 7));
  legendBesidePlot(m_curves);
  m_curves->xAxis->setLabel("step");
  curveLayout->addWidget(m_curves, 1);
  m_tabs->addTab(curvePage, "Curves");

  auto* scatterPage = new QWidget(this);
  auto* scatterLayout = new QVBoxLayout(scatterPage);
  auto* scatterRow = new QHBoxLayout;
  m_scatterX = new QComboBox(scatterPage);
  m_scatterY = new QComboBox(scatterPage);
  m_scatterStat = new QComboBox(scatterPage);
  m_scatterStat->addItems({"last", "best"});
  m_lowerX = new QCheckBox("lower x is better", scatterPage);
  m_lowerY = new QCheckBox("lower y is better", scatterPage);
  scatterRow->addWidget(new QLabel("x:", scatterPage));
  scatterRow->addWidget(m_scatterX, 1);
  scatterRow->addWidget(m_lowerX);
  scatterRow->addWidget(new QLabel("y:", scatterPage));
  scatterRow->addWidget(m_scatterY, 1);
  scatterRow->addWidget(m_lowerY);
  scatterRow->addWidget(m_scatterStat);
  scatterLayout->addLayout(scatterRow);
  m_scatter = new QCustomPlot(scatterPage);
  m_scatter->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_scatter->legend->setVisible(true);
  m_scatter->legend->setFont(QFont("sans", 7));
  legendBesidePlot(m_scatter);
  scatterLayout->addWidget(m_scatter, 1);
  m_tabs->addTab(scatterPage, "Scatter");

  m_groupPanel = new GroupPanel(this);
  m_groupPanel->setObjectName("groupPanel");
  m_tabs->addTab(m_groupPanel, "Groups");
  m_importancePanel = new ImportancePanel(this);
  m_tabs->addTab(m_importancePanel, "What matters");

  connect(m_onlyDiff, &QCheckBox::toggled, this, &CompareView::fillConfig);
  connect(m_curveMetric, &QComboBox::currentTextChanged, this, &CompareView::drawCurves);
  connect(m_curveX, &QComboBox::currentTextChanged, this, &CompareView::drawCurves);
  for (QCustomPlot* plot : {m_curves, m_scatter}) {
    plot->setObjectName(plot == m_curves ? "compare:curves" : "compare:scatter");
    plot->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(plot, &QWidget::customContextMenuRequested, this, [this, plot](const QPoint& at) {
      QMenu* menu = buildPlotMenu(plot);
      menu->exec(plot->mapToGlobal(at));
      menu->deleteLater();
    });
  }
  const auto axisChanged = [this]() {
    const std::string x = m_scatterX->currentText().toStdString(), y = m_scatterY->currentText().toStdString();
    m_lowerX->blockSignals(true);
    m_lowerY->blockSignals(true);
    m_lowerX->setChecked(lower_is_better(x, m_data.summary(0, x)));
    m_lowerY->setChecked(lower_is_better(y, m_data.summary(0, y)));
    m_lowerX->blockSignals(false);
    m_lowerY->blockSignals(false);
    drawScatter();
  };
  connect(m_scatterX, &QComboBox::currentTextChanged, this, axisChanged);
  connect(m_scatterY, &QComboBox::currentTextChanged, this, axisChanged);
  connect(m_scatterStat, &QComboBox::currentTextChanged, this, &CompareView::drawScatter);
  connect(m_scatter, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
    const QString tip = scatterTooltipAt(e->position());
    if (tip.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(e->globalPosition().toPoint(), tip, m_scatter);
  });
  connect(m_lowerX, &QCheckBox::toggled, this, &CompareView::drawScatter);
  connect(m_lowerY, &QCheckBox::toggled, this, &CompareView::drawScatter);
  connect(&m_watcher, &QFutureWatcher<CompareData>::finished, this, [this]() { showData(m_watcher.result()); });
}

void CompareView::setRuns(const QStringList& runIds) {
  m_ids = runIds;
  m_header->setText(QString("Loading %1 runs...").arg(runIds.size()));
  m_watcher.setFuture(QtConcurrent::run([db = m_db, runIds]() { return load_compare_data(db, runIds); }));
}

QString CompareView::runLabel(size_t i) const {
  const RunRecord& r = m_data.runs[i];
  // Ids are "date-time-random": the random tail tells runs of one day apart.
  const std::string tail = r.id.size() > 6 ? r.id.substr(r.id.size() - 6) : r.id;
  return QString("%1 (%2)").arg(QString::fromStdString(r.name), QString::fromStdString(tail));
}

void CompareView::showData(CompareData data) {
  m_data = std::move(data);
  m_groupPanel->setData(&m_data);
  m_importancePanel->setData(&m_data);
  if (!m_data.error.isEmpty()) {
    m_header->setText(m_data.error);
    emit loaded(m_data.error);
    return;
  }
  m_ids.clear();
  QStringList labels;
  for (size_t i = 0; i < m_data.runs.size(); ++i) {
    m_ids << QString::fromStdString(m_data.runs[i].id);
    labels << runLabel(i);
  }
  m_header->setText(QString("Comparing %1 runs: %2. %3 config keys differ, %4 are the same.")
                        .arg(m_data.runs.size())
                        .arg(labels.join(", "))
                        .arg(m_data.diff.differing.size())
                        .arg(m_data.diff.same));
  fillConfig();
  fillMetrics();
  QStringList metrics;
  for (const std::string& m : m_data.metricNames())
    metrics << QString::fromStdString(m);
  for (QComboBox* box : {m_curveMetric, m_curveX, m_scatterX, m_scatterY}) {
    box->blockSignals(true);
    box->clear();
    if (box == m_curveX)
      box->addItems({"step", "epoch"});
    box->addItems(metrics);
    box->blockSignals(false);
  }
  const auto pick = [&](QComboBox* box, const QString& preferred) {
    const int i = box->findText(preferred);
    if (i >= 0)
      box->setCurrentIndex(i);
  };
  pick(m_curveMetric, "train/loss");
  pick(m_curveMetric, "test/accuracy");  // preferred when the runs have it
  drawCurves();
  m_scatterX->blockSignals(true);
  pick(m_scatterX, "model/bytes");
  m_scatterX->blockSignals(false);
  pick(m_scatterY, "test/accuracy");
  setScatterAxes(m_scatterX->currentText(), m_scatterY->currentText());
  emit loaded({});
}

void CompareView::fillConfig() {
  const size_t n = m_data.runs.size();
  QStringList headers{"key"};
  for (size_t i = 0; i < n; ++i)
    headers << runLabel(i);
  m_config->clear();
  m_config->setColumnCount(static_cast<int>(n + 1));
  m_config->setHorizontalHeaderLabels(headers);
  std::map<std::string, std::vector<QString>> rows;
  for (size_t i = 0; i < n; ++i)
    for (const auto& [k, v] : m_data.params[i]) {
      auto& row = rows[k];
      row.resize(n, QString("(absent)"));
      row[i] = QString::fromStdString(v);
    }
  std::set<std::string> differing;
  for (const auto& row : m_data.diff.differing)
    differing.insert(row.key);
  // Where each model came from and went, as rows beside the config (provenance.from, provenance.to.N).
  for (size_t i = 0; i < n && i < m_data.provenance.size(); ++i) {
    int k = 0, sources = 0;  // a distilled run has two sources: the model and its teacher
    for (const ProvenanceRow& p : m_data.provenance[i]) {
      const std::string key = !p.incoming      ? "provenance.to." + std::to_string(++k)
                              : sources++ == 0 ? std::string("provenance.from")
                                               : "provenance.from." + std::to_string(sources);
      auto& row = rows[key];
      row.resize(n, QString("(absent)"));
      row[i] = QString::fromStdString(p.what + (p.file.empty() ? "" : ": " + p.file) +
                                      (p.sha256.empty() ? "" : " (sha256 " + p.sha256 + ")"));
    }
  }
  for (const auto& [key, values] : rows)
    if (key.rfind("provenance.", 0) == 0 &&
        std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) != values.end())
      differing.insert(key);
  m_config->setRowCount(0);
  for (const auto& [key, values] : rows) {
    const bool differs = differing.count(key) > 0;
    if (m_onlyDiff->isChecked() && !differs)
      continue;
    const int r = m_config->rowCount();
    m_config->insertRow(r);
    m_config->setItem(r, 0, cell(QString::fromStdString(key)));
    for (size_t i = 0; i < n; ++i) {
      auto* item = cell(i < values.size() ? values[i] : QString("(absent)"));
      if (differs)
        item->setBackground(QColor(255, 243, 205));
      m_config->setItem(r, static_cast<int>(i + 1), item);
    }
  }
  m_config->resizeColumnsToContents();
}

void CompareView::fillMetrics() {
  const size_t n = m_data.runs.size();
  QStringList headers{"metric", "unit", "stat"};
  for (size_t i = 0; i < n; ++i)
    headers << runLabel(i);
  m_metrics->clear();
  m_metrics->setColumnCount(static_cast<int>(n) + kFirstRunColumn);
  m_metrics->setHorizontalHeaderLabels(headers);
  m_metrics->setRowCount(0);
  for (const std::string& metric : m_data.metricNames()) {
    const int bestLast = best_run(m_data, metric, true), bestBest = best_run(m_data, metric, false);
    for (const char* stat : {"last", "best", "min", "max"}) {
      const int r = m_metrics->rowCount();
      m_metrics->insertRow(r);
      m_metrics->setItem(r, 0, cell(QString::fromStdString(metric)));
      m_metrics->setItem(r, 1, cell(QString::fromStdString(default_unit(metric))));
      m_metrics->setItem(r, 2, cell(stat));
      for (size_t i = 0; i < n; ++i) {
        const MetricSummary* s = m_data.summary(i, metric);
        double v = qQNaN();
        if (s) {
          const std::string st = stat;
          v = st == "last" ? s->last : st == "best" ? s->best() : st == "min" ? s->min : s->max;
        }
        QTableWidgetItem* item = cell(num(v));
        if (s && widgets::speedup_contended(m_data.summaries[i], metric)) {
          item->setText(item->text() + " " + QChar(0x2020));  // a dagger, as in the reports
          item->setForeground(QColor(183, 28, 28));
          item->setToolTip(widgets::kContendedSpeedupNote);
        }
        const int best = std::string(stat) == "last" ? bestLast : std::string(stat) == "best" ? bestBest : -1;
        if (static_cast<int>(i) == best) {  // the best run of this metric, by its direction
          QFont bold = item->font();
          bold.setBold(true);
          item->setFont(bold);
        }
        m_metrics->setItem(r, static_cast<int>(i) + kFirstRunColumn, item);
      }
    }
  }
  m_metrics->resizeColumnsToContents();
}

void CompareView::showPage(const QString& name) {
  for (int i = 0; i < m_tabs->count(); ++i)
    if (m_tabs->tabText(i).compare(name, Qt::CaseInsensitive) == 0)
      m_tabs->setCurrentIndex(i);
}

void CompareView::setCurveMetric(const QString& metric) { m_curveMetric->setCurrentText(metric); }

void CompareView::setCurveX(const QString& xMetric) { m_curveX->setCurrentText(xMetric); }

void CompareView::setCurveOptions(const PlotOptions& options) {
  applyPlotOptions(m_curves, options);  // throws before anything is kept
  m_curveOptions = options;
  drawCurves();
}

void CompareView::setScatterOptions(const PlotOptions& options) {
  applyPlotOptions(m_scatter, options);
  m_scatterOptions = options;
  drawScatter();
}

QMenu* CompareView::buildPlotMenu(QCustomPlot* plot) {
  auto* menu = new QMenu(this);
  const bool curves = plot == m_curves;
  addPlotOptionsActions(menu, plot, curves ? m_curveOptions : m_scatterOptions, [this, curves](const PlotOptions& o) {
    try {
      if (curves)
        setCurveOptions(o);
      else
        setScatterOptions(o);
    } catch (const std::exception& e) {
      QMessageBox::warning(this, "Chart options", e.what());
    }
  });
  return menu;
}

void CompareView::drawCurves() {
  m_curves->clearGraphs();
  m_curves->clearItems();
  m_curveHidden = 0;
  const std::string metric = m_curveMetric->currentText().toStdString();
  const std::string xMetric = m_curveX->currentText().isEmpty() ? "step" : m_curveX->currentText().toStdString();
  const bool byEpoch = xMetric == "epoch";
  const bool byStep = xMetric == "step" || byEpoch;
  auto it = m_data.curves.find(metric);
  auto xit = m_data.curves.find(xMetric);
  if (it != m_data.curves.end() && (byStep || xit != m_data.curves.end()))
    for (size_t i = 0; i < it->second.size(); ++i) {
      QCPGraph* g = m_curves->addGraph();
      g->setPen(QPen(widgets::chart_color(i), 1.4));
      g->setName(runLabel(i));
      QVector<double> x, y;
      if (byStep) {
        // By epoch: each run's steps over its own steps per epoch (2 ranks: half the steps of 1).
        const double per = byEpoch && i < m_data.stepsPerEpoch.size() ? m_data.stepsPerEpoch[i] : 0;
        for (const Point& p : it->second[i]) {
          x << (per > 0 ? static_cast<double>(p.step) / per : static_cast<double>(p.step));
          y << p.value;
        }
        if (byEpoch && per <= 0)
          g->setName(runLabel(i) + " (by step: epoch length unknown)");
      } else {
        for (const auto& [px, py] : pairByStep(xit->second[i], it->second[i])) {
          x << px;
          y << py;
        }
      }
      m_curveHidden += dropUnplottable(x, y, m_curveOptions.logX, m_curveOptions.logY);
      // One metric against another need not rise with the step: dots then, not a line in x order.
      const bool monotonic = byStep || std::is_sorted(x.begin(), x.end());
      if (!monotonic)
        g->setLineStyle(QCPGraph::lsNone);
      g->setData(x, y, byStep);
      // A short series (test loss per epoch: one to a few points) gets a marker on each point, so
      // a one-point series is visible and a few-point one is not mistaken for a dense curve.
      if (x.size() <= kMarkedPoints || !monotonic)
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, widgets::chart_color(i),
                                           !monotonic      ? 4
                                           : x.size() == 1 ? 7
                                                           : 5));
    }
  m_curves->xAxis->setLabel(QString::fromStdString(byStep ? xMetric : metric_label(xMetric)));
  m_curves->yAxis->setLabel(QString::fromStdString(metric_label(metric)));
  applyPlotOptions(m_curves, m_curveOptions);
  m_curves->rescaleAxes();
  for (QCPAxis* axis : {m_curves->xAxis, m_curves->yAxis})  // room for the markers at the ends
    padAxis(axis, 0.03);
  if (m_curveOptions.fixedY)
    m_curves->yAxis->setRange(m_curveOptions.yMin, m_curveOptions.yMax);
  addHiddenNote(m_curves, m_curveHidden);
  m_curves->replot();
}

void CompareView::setScatterAxes(const QString& xMetric, const QString& yMetric) {
  m_scatterX->setCurrentText(xMetric);
  m_scatterY->setCurrentText(yMetric);
  const std::string x = xMetric.toStdString(), y = yMetric.toStdString();
  m_lowerX->setChecked(lower_is_better(x, m_data.summary(0, x)));
  m_lowerY->setChecked(lower_is_better(y, m_data.summary(0, y)));
  drawScatter();
}

QString CompareView::scatterTooltipAt(const QPointF& pixel) const {
  int best = -1;
  double best_d2 = 12.0 * 12.0;
  for (size_t k = 0; k < m_scatterPoints.size(); ++k) {
    const XY& p = m_scatterPoints[k].second;
    const double dx = m_scatter->xAxis->coordToPixel(p.x) - pixel.x();
    const double dy = m_scatter->yAxis->coordToPixel(p.y) - pixel.y();
    if (dx * dx + dy * dy <= best_d2) {
      best_d2 = dx * dx + dy * dy;
      best = static_cast<int>(k);
    }
  }
  if (best < 0)
    return {};
  const auto& [run, p] = m_scatterPoints[best];
  const bool front = std::find(m_front.begin(), m_front.end(), run) != m_front.end();
  return QString("%1\n%2: %3\n%4: %5%6")
      .arg(runLabel(run), m_scatterX->currentText(), num(p.x), m_scatterY->currentText(), num(p.y),
           front ? QString("\non the Pareto front") : QString());
}

void CompareView::drawScatter() {
  m_scatter->clearGraphs();
  m_scatter->clearItems();
  m_front.clear();
  m_scatterPoints.clear();
  const std::string xm = m_scatterX->currentText().toStdString(), ym = m_scatterY->currentText().toStdString();
  const bool best = m_scatterStat->currentText() == "best";
  std::vector<XY> points;
  for (size_t i = 0; i < m_data.runs.size(); ++i) {
    const MetricSummary *sx = m_data.summary(i, xm), *sy = m_data.summary(i, ym);
    XY p{qQNaN(), qQNaN()};
    if (sx && sy)
      p = {best ? sx->best() : sx->last, best ? sy->best() : sy->last};
    points.push_back(p);
  }
  m_front = pareto_front(points, !m_lowerX->isChecked(), !m_lowerY->isChecked());
  m_scatterHidden = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!std::isfinite(points[i].x) || !std::isfinite(points[i].y))
      continue;
    if ((m_scatterOptions.logX && points[i].x <= 0) || (m_scatterOptions.logY && points[i].y <= 0)) {
      ++m_scatterHidden;
      continue;
    }
    QCPGraph* g = m_scatter->addGraph();
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, widgets::chart_color(i), 9));
    g->setName(runLabel(i));
    g->addData(points[i].x, points[i].y);
    m_scatterPoints.emplace_back(static_cast<int>(i), points[i]);
  }
  if (!m_front.empty()) {
    QCPGraph* front = m_scatter->addGraph();
    front->setName("Pareto front");
    front->setPen(QPen(QColor(60, 60, 60), 1.5, Qt::DashLine));
    front->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(QColor(60, 60, 60), 1.5), Qt::NoBrush, 15));
    QVector<double> x, y;
    for (int i : m_front) {
      x << points[i].x;
      y << points[i].y;
    }
    dropUnplottable(x, y, m_scatterOptions.logX, m_scatterOptions.logY);
    front->setData(x, y, true);
  }
  m_scatter->xAxis->setLabel(QString::fromStdString(metric_label(xm)) + (m_lowerX->isChecked() ? ", lower is better" : ""));
  m_scatter->yAxis->setLabel(QString::fromStdString(metric_label(ym)) + (m_lowerY->isChecked() ? ", lower is better" : ""));
  applyPlotOptions(m_scatter, m_scatterOptions);
  m_scatter->rescaleAxes();
  padAxis(m_scatter->xAxis, 0.08);
  padAxis(m_scatter->yAxis, 0.08);
  if (m_scatterOptions.fixedY)
    m_scatter->yAxis->setRange(m_scatterOptions.yMin, m_scatterOptions.yMax);
  addHiddenNote(m_scatter, m_scatterHidden);
  m_scatter->replot();
}

}  // namespace lathe::ui
