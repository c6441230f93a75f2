// ImportancePanel: the compare view's "What matters" tab. For a chosen metric (last or best value)
// over the compared runs, the knobs as horizontal bars of their share of the random forest's
// permutation importance, most important on top, and a table with Spearman's rho for numeric
// knobs (engine/analysis/importance.h). Recomputed when the metric or stat changes.
#pragma once

#include <qcustomplot.h>
#include <QComboBox>
#include <QLabel>
#include <QTableWidget>
#include <QWidget>

#include "engine/analysis/importance.h"
#include "widgets/ui/compare_data.h"

namespace lathe::ui {

class ImportancePanel : public QWidget {
  Q_OBJECT
 public:
  explicit ImportancePanel(QWidget* parent = nullptr);
  void setData(const CompareData* data);
  void setMetric(const QString& metric);
  const ImportanceResult& result() const { return m_result; }
  QCustomPlot* plot() const { return m_plot; }
  QTableWidget* table() const { return m_table; }
  QLabel* note() const { return m_note; }

 private:
  void compute();

  const CompareData* m_data = nullptr;
  ImportanceResult m_result;
  QComboBox *m_metric, *m_stat;
  QLabel* m_note;
  QCustomPlot* m_plot;
  QTableWidget* m_table;
};

}  // namespace lathe::ui
