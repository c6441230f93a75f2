// GroupPanel (see group_panel.h).
#include "widgets/ui/group_panel.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QMessageBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "engine/analysis/group_series.h"
#include "engine/store/store_types.h"
#include "widgets/common/chart_palette.h"

namespace lathe::ui {

namespace {

const char* kStdNote = "std: the sample standard deviation (ddof=1, as numpy.std(x, ddof=1)) over a group's members";

QTableWidgetItem* cell(const QString& text) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(item->flags() & ~Qt::ItemIsEditable);
  return item;
}

}  // namespace

GroupPanel::GroupPanel(QWidget* parent) : QWidget(parent) {
  auto* column = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  m_groupBy = new QLineEdit(this);
  m_groupBy->setObjectName("groupBy");
  m_groupBy->setPlaceholderText("config without seed  (or keys: prune.ratio,quant.mode  or  -seed,-train.lr)");
  m_groupBy->setToolTip(
      "Empty: runs whose config is the same but for the seed (and name) form a group. Keys separated by commas: "
      "group by those. Keys with a leading '-': the config without them.");
  m_metric = new QComboBox(this);
  m_metric->setObjectName("groupMetric");
  m_band = new QComboBox(this);
  m_band->setObjectName("groupBand");
  m_band->addItems({"mean \u00b1 std band", "min/max envelope"});
  m_members = new QCheckBox("Members", this);
  m_members->setObjectName("groupMembers");
  m_members->setToolTip("Draw each member run's own trace, thin, in its group's color");
  row->addWidget(new QLabel("Group by:", this));
  row->addWidget(m_groupBy, 2);
  m_curveX = new QComboBox(this);
  m_curveX->setObjectName("groupCurveX");
  m_curveX->addItem("step");
  m_curveX->setToolTip("The curves' x axis: the step, or any metric (each group's mean against its mean x at that step)");
  row->addWidget(new QLabel("Metric:", this));
  row->addWidget(m_metric, 1);
  row->addWidget(new QLabel("x:", this));
  row->addWidget(m_curveX, 1);
  row->addWidget(m_band);
  row->addWidget(m_members);
  column->addLayout(row);
  auto* row2 = new QHBoxLayout;
  m_view = new QComboBox(this);
  m_view->setObjectName("groupView");
  m_view->addItems({"curves", "scatter"});
  m_scatterX = new QComboBox(this);
  m_scatterX->setObjectName("groupScatterX");
  m_scatterY = new QComboBox(this);
  m_scatterY->setObjectName("groupScatterY");
  row2->addWidget(new QLabel("Chart:", this));
  row2->addWidget(m_view);
  row2->addWidget(new QLabel("scatter x:", this));
  row2->addWidget(m_scatterX, 1);
  row2->addWidget(new QLabel("y:", this));
  row2->addWidget(m_scatterY, 1);
  column->addLayout(row2);
  m_note = new QLabel(kStdNote, this);
  m_note->setObjectName("groupNote");
  m_note->setWordWrap(true);
  column->addWidget(m_note);
  auto* split = new QSplitter(Qt::Vertical, this);
  m_table = new QTableWidget(split);
  m_table->setObjectName("groupTable");
  m_plot = new QCustomPlot(split);
  m_plot->setObjectName("groupPlot");
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_plot->legend->setVisible(true);
  m_plot->legend->setFont(QFont("sans", 7));
  m_plot->xAxis->setLabel("step");
  m_plot->setToolTip("Right-click: log axes, y range, export PNG / SVG");
  m_plot->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(m_plot, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    QMenu* menu = buildPlotMenu();
    menu->exec(m_plot->mapToGlobal(at));
    menu->deleteLater();
  });
  split->addWidget(m_table);
  split->addWidget(m_plot);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 3);
  split->setSizes({160, 480});
  column->addWidget(split, 1);

  connect(m_groupBy, &QLineEdit::editingFinished, this, &GroupPanel::regroup);
  connect(m_metric, &QComboBox::currentTextChanged, this, &GroupPanel::draw);
  connect(m_curveX, &QComboBox::currentTextChanged, this, &GroupPanel::draw);
  connect(m_band, &QComboBox::currentIndexChanged, this, &GroupPanel::draw);
  connect(m_members, &QCheckBox::toggled, this, &GroupPanel::draw);
  connect(m_view, &QComboBox::currentIndexChanged, this, &GroupPanel::draw);
  connect(m_scatterX, &QComboBox::currentTextChanged, this, &GroupPanel::draw);
  connect(m_scatterY, &QComboBox::currentTextChanged, this, &GroupPanel::draw);
}

void GroupPanel::setData(const CompareData* data) {
  m_data = data;
  const QString keep = m_metric->currentText();
  m_metric->blockSignals(true);
  m_metric->clear();
  if (m_data)
    for (const std::string& m : m_data->metricNames())
      if (m_data->curves.count(m))
        m_metric->addItem(QString::fromStdString(m));
  for (const QString& want : {keep, QString("train/loss"), QString("test/accuracy")})
    if (!want.isEmpty() && m_metric->findText(want) >= 0 && (want == keep || m_metric->currentText() != keep))
      m_metric->setCurrentText(want);
  m_metric->blockSignals(false);
  const QString keepX = m_curveX->currentText();
  m_curveX->blockSignals(true);
  m_curveX->clear();
  m_curveX->addItem("step");
  for (int i = 0; i < m_metric->count(); ++i)
    m_curveX->addItem(m_metric->itemText(i));
  m_curveX->setCurrentIndex(std::max(0, m_curveX->findText(keepX)));
  m_curveX->blockSignals(false);
  for (QComboBox* box : {m_scatterX, m_scatterY}) {  // any metric with a summary (one value a run)
    const QString keepAxis = box->currentText();
    box->blockSignals(true);
    box->clear();
    if (m_data)
      for (const std::string& m : m_data->metricNames())
        box->addItem(QString::fromStdString(m));
    if (box->findText(keepAxis) >= 0)
      box->setCurrentText(keepAxis);
    else if (box->findText(box == m_scatterX ? "model/bytes" : "test/accuracy") >= 0)
      box->setCurrentText(box == m_scatterX ? "model/bytes" : "test/accuracy");
    box->blockSignals(false);
  }
  regroup();
}

void GroupPanel::setGroupBy(const QString& text) {
  m_groupBy->setText(text);
  regroup();
}

void GroupPanel::setMetric(const QString& metric) { m_metric->setCurrentText(metric); }
void GroupPanel::setBand(Band band) { m_band->setCurrentIndex(static_cast<int>(band)); }
void GroupPanel::setShowMembers(bool on) { m_members->setChecked(on); }
void GroupPanel::setView(View view) { m_view->setCurrentIndex(static_cast<int>(view)); }

void GroupPanel::setScatterAxes(const QString& xMetric, const QString& yMetric) {
  m_scatterX->blockSignals(true);
  m_scatterX->setCurrentText(xMetric);
  m_scatterX->blockSignals(false);
  m_scatterY->setCurrentText(yMetric);
  if (m_view->currentIndex() != static_cast<int>(View::scatter))
    setView(View::scatter);
  else
    draw();
}

void GroupPanel::setCurveX(const QString& xMetric) { m_curveX->setCurrentText(xMetric); }

void GroupPanel::setPlotOptions(const PlotOptions& options) {
  applyPlotOptions(m_plot, options);  // throws before anything is kept
  m_options = options;
  draw();
}

QMenu* GroupPanel::buildPlotMenu() {
  auto* menu = new QMenu(this);
  addPlotOptionsActions(menu, m_plot, m_options, [this](const PlotOptions& o) {
    try {
      setPlotOptions(o);
    } catch (const std::exception& e) {
      QMessageBox::warning(this, "Chart options", e.what());
    }
  });
  return menu;
}

void GroupPanel::finishPlot(double pad) {
  applyPlotOptions(m_plot, m_options);
  for (QCPAxis* axis : {m_plot->xAxis, m_plot->yAxis})
    padAxis(axis, pad);
  if (m_options.fixedY)
    m_plot->yAxis->setRange(m_options.yMin, m_options.yMax);
  addHiddenNote(m_plot, m_hidden);
  m_plot->replot();
}

void GroupPanel::drawScatter() {
  m_plot->clearPlottables();
  m_plot->clearItems();
  m_hidden = 0;
  // Small models with high accuracy sit top left: the legend goes bottom right.
  m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  const std::string xm = m_scatterX->currentText().toStdString(), ym = m_scatterY->currentText().toStdString();
  QCPRange xr, yr;  // not QCPRange(lo, hi): its constructor swaps an empty range
  xr.lower = yr.lower = INFINITY;
  xr.upper = yr.upper = -INFINITY;
  const auto widen = [](QCPRange& r, double mean, double sd) {
    const double e = std::isfinite(sd) ? sd : 0.0;
    r.lower = std::min(r.lower, mean - e);
    r.upper = std::max(r.upper, mean + e);
  };
  for (size_t g = 0; g < m_groups.size(); ++g) {
    const GroupMetric *gx = m_groups[g].metric(xm), *gy = m_groups[g].metric(ym);
    if (!gx || !gy || gx->last.n == 0 || gy->last.n == 0)
      continue;
    if ((m_options.logX && !(gx->last.mean > 0)) || (m_options.logY && !(gy->last.mean > 0))) {
      ++m_hidden;  // a log axis cannot show it
      continue;
    }
    const QColor color = widgets::chart_color(g);
    QCPGraph* point = m_plot->addGraph();
    point->setLineStyle(QCPGraph::lsNone);
    point->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, 9));
    point->setName(QString("%1 (n=%2)").arg(QString::fromStdString(m_groups[g].label)).arg(m_groups[g].run_ids.size()));
    point->addData(gx->last.mean, gy->last.mean);
    widen(xr, gx->last.mean, gx->last.std);
    widen(yr, gy->last.mean, gy->last.std);
    for (auto [type, sd] :
         {std::pair{QCPErrorBars::etKeyError, gx->last.std}, std::pair{QCPErrorBars::etValueError, gy->last.std}}) {
      auto* bars = new QCPErrorBars(m_plot->xAxis, m_plot->yAxis);
      bars->removeFromLegend();
      bars->setDataPlottable(point);
      bars->setErrorType(type);
      bars->setPen(QPen(color, 1.4));
      bars->setData(QVector<double>{std::isfinite(sd) ? sd : 0.0});
    }
  }
  m_plot->xAxis->setLabel(QString::fromStdString(metric_label(xm)) + "    (group mean of last values; bars: \u00b1 1 sample std)");
  m_plot->yAxis->setLabel(QString::fromStdString(metric_label(ym)));
  applyPlotOptions(m_plot, m_options);
  m_plot->rescaleAxes();
  // rescaleAxes() ignores the error bars: widen to them (on a log axis only while the range
  // stays above 0), then pad.
  if (xr.lower <= xr.upper) {
    if (!m_options.logX || xr.lower > 0)
      m_plot->xAxis->setRange(xr);
    if (!m_options.logY || yr.lower > 0)
      m_plot->yAxis->setRange(yr);
  }
  finishPlot(0.08);
}

void GroupPanel::regroup() {
  m_groups.clear();
  m_note->setStyleSheet({});
  m_note->setText(kStdNote);
  if (m_data && m_data->error.isEmpty()) {
    try {
      const GroupBy by = GroupBy::parse(m_groupBy->text().toStdString());
      std::vector<RunFacts> facts;
      for (size_t i = 0; i < m_data->runs.size(); ++i)
        facts.push_back({m_data->runs[i].id, m_data->params[i], m_data->summaries[i]});
      m_groups = group_runs(facts, by);
      m_note->setText(QString("%1 group(s) of %2 runs by %3. %4.")
                          .arg(m_groups.size())
                          .arg(m_data->runs.size())
                          .arg(QString::fromStdString(by.describe()), kStdNote));
    } catch (const std::exception& e) {
      m_note->setStyleSheet("color: #b71c1c");
      m_note->setText(QString::fromUtf8(e.what()));
    }
  }
  fillTable();
  draw();
}

void GroupPanel::fillTable() {
  m_table->clear();
  m_table->setRowCount(0);
  // The headline metrics first, then the rest by name.
  std::set<std::string> all;
  for (const RunGroup& g : m_groups)
    for (const GroupMetric& m : g.metrics)
      all.insert(m.metric);
  std::vector<std::string> names;
  for (const char* m : {"test/accuracy", "test/loss", "train/loss", "model/bytes", "train/samples_per_s", "cost/usd"})
    if (all.erase(m))
      names.push_back(m);
  names.insert(names.end(), all.begin(), all.end());
  QStringList headers{"group", "n"};
  for (const std::string& m : names)
    headers << QString::fromStdString(m) + " (last)";
  m_table->setColumnCount(headers.size());
  m_table->setHorizontalHeaderLabels(headers);
  for (size_t g = 0; g < m_groups.size(); ++g) {
    const RunGroup& group = m_groups[g];
    m_table->insertRow(static_cast<int>(g));
    auto* label = cell(QString::fromStdString(group.label));
    label->setForeground(widgets::chart_color(g));
    QString members;
    for (const std::string& id : group.run_ids)
      members += QString::fromStdString(id) + "\n";
    label->setToolTip("Members:\n" + members.trimmed());
    m_table->setItem(static_cast<int>(g), 0, label);
    m_table->setItem(static_cast<int>(g), 1, cell(QString::number(group.run_ids.size())));
    int c = 2;
    for (const std::string& name : names) {
      const GroupMetric* m = group.metric(name);
      auto* item = cell(m ? QString::fromStdString(format_spread(m->last)) : QString("-"));
      if (m)
        item->setToolTip(
            QString("last: %1\nbest: %2\nmin %3, max %4 over the members' last values")
                .arg(QString::fromStdString(format_spread(m->last)), QString::fromStdString(format_spread(m->best)))
                .arg(m->last.min)
                .arg(m->last.max));
      m_table->setItem(static_cast<int>(g), c++, item);
    }
  }
  m_table->resizeColumnsToContents();
}

void GroupPanel::draw() {
  if (m_view->currentIndex() == static_cast<int>(View::scatter)) {
    drawScatter();
    return;
  }
  m_plot->clearPlottables();
  m_plot->clearItems();
  m_hidden = 0;
  m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  const std::string metric = m_metric->currentText().toStdString();
  const std::string xMetric = m_curveX->currentText().isEmpty() ? "step" : m_curveX->currentText().toStdString();
  const bool byStep = xMetric == "step";
  const bool envelope = m_band->currentIndex() == static_cast<int>(Band::envelope);
  if (m_data && !metric.empty()) {
    auto curves = m_data->curves.find(metric);
    auto xCurves = m_data->curves.find(xMetric);
    if (!byStep && xCurves == m_data->curves.end())
      curves = m_data->curves.end();  // an x metric these runs do not log: nothing to draw
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < m_data->runs.size(); ++i)
      index[m_data->runs[i].id] = i;
    for (size_t g = 0; g < m_groups.size() && curves != m_data->curves.end(); ++g) {
      const QColor color = widgets::chart_color(g);
      std::vector<std::vector<Point>> members, xMembers;
      for (const std::string& id : m_groups[g].run_ids) {
        members.push_back(curves->second[index[id]]);
        if (!byStep)
          xMembers.push_back(xCurves->second[index[id]]);
      }
      std::vector<Point> meanPts, loPts, hiPts;  // y by step: mean, band low, band high
      for (const GroupPoint& p : group_series(members)) {
        const double sd = p.spread.n >= 2 ? p.spread.std : 0.0;
        meanPts.push_back({p.step, 0.0, p.spread.mean});
        loPts.push_back({p.step, 0.0, envelope ? p.spread.min : p.spread.mean - sd});
        hiPts.push_back({p.step, 0.0, envelope ? p.spread.max : p.spread.mean + sd});
      }
      std::vector<Point> xMean;  // metric as x: the group's mean x at each step
      if (!byStep)
        for (const GroupPoint& p : group_series(xMembers))
          xMean.push_back({p.step, 0.0, p.spread.mean});
      // (x, y) of a series: by step, or paired with the mean x at (or before) its step.
      const auto xy = [&](const std::vector<Point>& ys, const std::vector<Point>& xs, QVector<double>& x,
                          QVector<double>& y, bool count) {
        if (byStep)
          for (const Point& p : ys) {
            x << static_cast<double>(p.step);
            y << p.value;
          }
        else
          for (const std::pair<double, double>& p : pairByStep(xs, ys)) {
            x << p.first;
            y << p.second;
          }
        const int dropped = dropUnplottable(x, y, m_options.logX, m_options.logY);
        if (count)
          m_hidden += dropped;
      };
      QVector<double> x, mean, lx, lo, hx, hi;
      xy(meanPts, xMean, x, mean, true);
      xy(loPts, xMean, lx, lo, false);
      xy(hiPts, xMean, hx, hi, false);
      const bool monotonic = byStep || std::is_sorted(x.begin(), x.end());
      QCPGraph* lower = m_plot->addGraph();
      lower->setData(lx, lo, byStep);
      lower->setPen(Qt::NoPen);
      lower->removeFromLegend();
      QCPGraph* upper = m_plot->addGraph();
      upper->setData(hx, hi, byStep);
      upper->setPen(Qt::NoPen);
      QColor fill = color;
      fill.setAlpha(60);
      if (monotonic) {  // a band only where x rises with the step (else dots, no band)
        upper->setBrush(fill);
        upper->setChannelFillGraph(lower);
      }
      upper->removeFromLegend();
      if (m_members->isChecked())
        for (size_t k = 0; k < members.size(); ++k) {
          QCPGraph* m = m_plot->addGraph();
          QColor thin = color;
          thin.setAlpha(110);
          m->setPen(QPen(thin, 0.8));
          QVector<double> mx, my;
          if (byStep)
            for (const Point& p : members[k]) {
              mx << static_cast<double>(p.step);
              my << p.value;
            }
          else
            for (const std::pair<double, double>& p : pairByStep(xMembers[k], members[k])) {
              mx << p.first;
              my << p.second;
            }
          dropUnplottable(mx, my, m_options.logX, m_options.logY);
          if (!monotonic)
            m->setLineStyle(QCPGraph::lsNone);
          m->setData(mx, my, byStep);
          m->removeFromLegend();
        }
      QCPGraph* line = m_plot->addGraph();
      line->setPen(QPen(color, 2.0));
      line->setName(
          QString("%1 (n=%2)").arg(QString::fromStdString(m_groups[g].label)).arg(m_groups[g].run_ids.size()));
      line->setData(x, mean, byStep);
      if (!monotonic)
        line->setLineStyle(QCPGraph::lsNone);
      if (x.size() <= 30 || !monotonic)
        line->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, 5));
    }
  }
  m_plot->yAxis->setLabel(QString::fromStdString(metric_label(metric)));
  const QString x = byStep ? QString("step") : QString::fromStdString(metric_label(xMetric)) + ", group mean";
  m_plot->xAxis->setLabel(envelope ? x + "    (line: group mean; band: min to max of the members)"
                                   : x + "    (line: group mean; band: \u00b1 1 sample std, ddof=1)");
  applyPlotOptions(m_plot, m_options);
  m_plot->rescaleAxes();
  finishPlot(0.03);  // room for the markers at the ends
}

}  // namespace lathe::ui
