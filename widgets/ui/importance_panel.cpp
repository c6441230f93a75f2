// ImportancePanel (see importance_panel.h).
#include "widgets/ui/importance_panel.h"

#include <QHBoxLayout>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>

#include "widgets/common/chart_palette.h"

namespace lathe::ui {

ImportancePanel::ImportancePanel(QWidget* parent) : QWidget(parent) {
  auto* column = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  m_metric = new QComboBox(this);
  m_metric->setObjectName("importanceMetric");
  m_stat = new QComboBox(this);
  m_stat->addItems({"last", "best"});
  row->addWidget(new QLabel("Metric:", this));
  row->addWidget(m_metric, 1);
  row->addWidget(m_stat);
  column->addLayout(row);
  m_note = new QLabel(this);
  m_note->setObjectName("importanceNote");
  m_note->setWordWrap(true);
  column->addWidget(m_note);
  auto* split = new QSplitter(Qt::Vertical, this);
  m_plot = new QCustomPlot(split);
  m_plot->setObjectName("importancePlot");
  m_table = new QTableWidget(split);
  m_table->setObjectName("importanceTable");
  split->addWidget(m_plot);
  split->addWidget(m_table);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 1);
  column->addWidget(split, 1);
  connect(m_metric, &QComboBox::currentTextChanged, this, &ImportancePanel::compute);
  connect(m_stat, &QComboBox::currentTextChanged, this, &ImportancePanel::compute);
}

void ImportancePanel::setData(const CompareData* data) {
  m_data = data;
  m_metric->blockSignals(true);
  const QString keep = m_metric->currentText();
  m_metric->clear();
  if (m_data)
    for (const std::string& m : m_data->metricNames())
      m_metric->addItem(QString::fromStdString(m));
  if (m_metric->findText(keep) >= 0)
    m_metric->setCurrentText(keep);
  else if (m_metric->findText("test/accuracy") >= 0)
    m_metric->setCurrentText("test/accuracy");
  m_metric->blockSignals(false);
  compute();
}

void ImportancePanel::setMetric(const QString& metric) { m_metric->setCurrentText(metric); }

void ImportancePanel::compute() {
  m_result = {};
  m_plot->clearPlottables();
  m_table->clear();
  m_table->setRowCount(0);
  m_note->setStyleSheet({});
  if (!m_data || !m_data->error.isEmpty() || m_metric->currentText().isEmpty()) {
    m_plot->replot();
    return;
  }
  try {
    std::vector<RunFacts> facts;
    for (size_t i = 0; i < m_data->runs.size(); ++i)
      facts.push_back({m_data->runs[i].id, m_data->params[i], m_data->summaries[i]});
    ImportanceOptions o;
    o.metric = m_metric->currentText().toStdString();
    o.stat = m_stat->currentText().toStdString();
    m_result = knob_importance(facts, o);
  } catch (const std::exception& e) {
    m_note->setStyleSheet("color: #b71c1c");
    m_note->setText(QString::fromUtf8(e.what()));
    m_plot->replot();
    return;
  }
  m_note->setText(
      QString("What matters for %1 (%2 value) over %3 runs: each knob's share of the permutation importance "
              "of a random forest (%4 trees) fit to all knobs at once (R\u00b2 on these runs %5); "
              "Spearman's rank correlation for numeric knobs in the table.")
          .arg(QString::fromStdString(m_result.metric), QString::fromStdString(m_result.stat))
          .arg(m_result.runs)
          .arg(ForestOptions{}.trees)
          .arg(m_result.r2_train, 0, 'f', 3));
  // Horizontal bars, the most important at the top.
  auto* bars = new QCPBars(m_plot->yAxis, m_plot->xAxis);
  bars->setBrush(widgets::chart_color(0));
  bars->setPen(Qt::NoPen);
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  const int n = static_cast<int>(m_result.knobs.size());
  QVector<double> keys, values;
  for (int i = 0; i < n; ++i) {
    const double key = n - i;
    keys << key;
    values << 100 * m_result.knobs[i].share;
    ticker->addTick(key, QString::fromStdString(m_result.knobs[i].knob));
  }
  bars->setData(keys, values, true);
  bars->setWidth(0.6);
  m_plot->yAxis->setTicker(ticker);
  m_plot->yAxis->setRange(0.4, n + 0.6);
  m_plot->xAxis->setLabel("share of permutation importance (%)");
  m_plot->xAxis->setRange(0, 100);
  m_plot->replot();

  m_table->setColumnCount(5);
  m_table->setHorizontalHeaderLabels({"knob", "share", "permutation (\u0394 MSE)", "Spearman \u03c1", "values"});
  for (int i = 0; i < n; ++i) {
    const KnobImportance& k = m_result.knobs[i];
    m_table->insertRow(i);
    auto set = [&](int c, const QString& text) {
      auto* item = new QTableWidgetItem(text);
      item->setFlags(item->flags() & ~Qt::ItemIsEditable);
      m_table->setItem(i, c, item);
    };
    set(0, QString::fromStdString(k.knob));
    set(1, QString("%1%").arg(100 * k.share, 0, 'f', 1));
    set(2, QString::number(k.permutation, 'g', 3));
    set(3, std::isfinite(k.spearman) ? QString::number(k.spearman, 'f', 3) : QString("- (categorical)"));
    set(4, QString::number(k.levels));
  }
  m_table->resizeColumnsToContents();
}

}  // namespace lathe::ui
