// Off-screen QCustomPlot charts for the reports (see report_charts.h).
#include "widgets/report/report_charts.h"

#include <qcustomplot.h>
#include <QApplication>
#include <QBuffer>
#include <QFontMetrics>
#include <QThread>
#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "widgets/common/chart_palette.h"

namespace lathe::report {

namespace {

const QColor kAxisColor(0x5b, 0x67, 0x75);
const QColor kGridColor(0xe3, 0xe8, 0xee);

void style_axis(QCPAxis* axis, const QString& label) {
  QFont tick("DejaVu Sans", 8);
  QFont title("DejaVu Sans", 8);
  axis->setLabel(label);
  axis->setLabelFont(title);
  axis->setLabelColor(kAxisColor);
  axis->setTickLabelFont(tick);
  axis->setTickLabelColor(kAxisColor);
  axis->setBasePen(QPen(kAxisColor, 1));
  axis->setTickPen(QPen(kAxisColor, 1));
  axis->setSubTickPen(QPen(kAxisColor, 1));
  axis->setTickLengthOut(3);
  axis->setTickLengthIn(0);
  axis->setSubTickLengthIn(0);
  axis->setSubTickLengthOut(0);
  axis->grid()->setPen(QPen(kGridColor, 1));
  axis->grid()->setZeroLinePen(QPen(kGridColor, 1));
  axis->setNumberFormat("gb");  // 1.5·10^6 rather than 1.5e+06
}

/// Value range over every finite point, padded 6% (or +-1 / +-5% for a constant series).
QCPRange value_range(const ChartSpec& spec) {
  double lo = INFINITY, hi = -INFINITY;
  for (const ChartLine& line : spec.lines)
    for (const std::vector<Point>* pts : {line.points, line.band_lo, line.band_hi})
      if (pts)
        for (const Point& p : *pts)
          if (std::isfinite(p.value)) {
            lo = std::min(lo, p.value);
            hi = std::max(hi, p.value);
          }
  if (!std::isfinite(lo))
    return QCPRange(0, 1);
  if (hi - lo <= 1e-12 * std::max(1.0, std::fabs(hi))) {
    const double pad = lo == 0 ? 1.0 : 0.05 * std::fabs(lo);
    return QCPRange(lo - pad, hi + pad);
  }
  const double pad = 0.06 * (hi - lo);
  return QCPRange(lo - pad, hi + pad);
}

}  // namespace

std::string run_color(size_t index) { return widgets::chart_color_hex(index); }

void require_widget_application(const char* what) {
  auto* app = qobject_cast<QApplication*>(QCoreApplication::instance());
  if (!app)
    throw Error(std::string(what) +
                " renders its charts with Qt widgets: create a QApplication first (lathe-cli report does, with "
                "the offscreen platform)");
  if (QThread::currentThread() != app->thread())
    throw Error(std::string(what) + " must run on the thread of the QApplication (the GUI thread)");
}

std::string wrap_legend_label(const std::string& label, int width) {
  const QFontMetrics metrics(QFont("DejaVu Sans", 8));
  const int room = std::max(40, width - 16 - 10 - 30);  // icon, spacing, the item's and the layout's margins
  const QStringList words = QString::fromStdString(label).split(' ', Qt::SkipEmptyParts);
  QString out, line;
  for (const QString& word : words) {
    const QString candidate = line.isEmpty() ? word : line + ' ' + word;
    if (!line.isEmpty() && metrics.horizontalAdvance(candidate) > room) {
      out += (out.isEmpty() ? "" : "\n") + line;
      line = word;
    } else {
      line = candidate;
    }
  }
  out += (out.isEmpty() ? "" : "\n") + line;
  return out.toStdString();
}

int legend_columns(const std::vector<std::string>& labels, int width) {
  const QFontMetrics metrics(QFont("DejaVu Sans", 8));
  int widest = 0;  // whole labels: columns only while every label fits on one line
  for (const std::string& label : labels)
    widest = std::max(widest, metrics.horizontalAdvance(QString::fromStdString(label)));
  const int entry = widest + 16 + 10 + 30;  // text, icon, column spacing, the margins
  return std::clamp(width / std::max(1, entry), 1, 3);
}

int legend_lines(const std::vector<std::string>& labels, int width) {
  const size_t columns = static_cast<size_t>(legend_columns(labels, width));
  int lines = 0;
  for (size_t row = 0; row < labels.size(); row += columns) {
    int tallest = 1;
    for (size_t i = row; i < std::min(labels.size(), row + columns); ++i)
      tallest = std::max(tallest,
                         static_cast<int>(QString::fromStdString(wrap_legend_label(labels[i], width)).count('\n')) + 1);
    lines += tallest;
  }
  return lines;
}

QByteArray render_chart_png(const ChartSpec& spec, int width, int height, double scale) {
  require_widget_application("an html or pdf report");
  QCustomPlot plot;
  plot.setAttribute(Qt::WA_DontShowOnScreen);
  plot.setBackground(Qt::white);
  plot.setAntialiasedElements(QCP::aeAll);
  plot.setNotAntialiasedElements(QCP::aeAxes | QCP::aeGrid);

  auto* title = new QCPTextElement(&plot, QString::fromStdString(spec.title), QFont("DejaVu Sans", 9, QFont::Bold));
  title->setTextColor(QColor(0x1d, 0x27, 0x33));
  plot.plotLayout()->insertRow(0);
  plot.plotLayout()->addElement(0, 0, title);

  double x_lo = INFINITY, x_hi = -INFINITY;
  for (const ChartLine& line : spec.lines) {
    LATHE_CHECK(line.points, "chart line '", line.label, "' has no points");
    QVector<double> keys, values;
    keys.reserve(static_cast<int>(line.points->size()));
    values.reserve(static_cast<int>(line.points->size()));
    for (const Point& p : *line.points) {
      keys.push_back(static_cast<double>(p.step));
      values.push_back(p.value);  // NaN breaks the line, as it should
      x_lo = std::min(x_lo, static_cast<double>(p.step));
      x_hi = std::max(x_hi, static_cast<double>(p.step));
    }
    const QColor color(QString::fromStdString(line.color));
    if (line.band_lo && line.band_hi) {  // two pen-less graphs, the space between them filled
      auto band_graph = [&](const std::vector<Point>& pts) {
        QCPGraph* g = plot.addGraph();
        QVector<double> k, v;
        for (const Point& p : pts) {
          k.push_back(static_cast<double>(p.step));
          v.push_back(p.value);
        }
        g->setData(k, v, true);
        g->setPen(Qt::NoPen);
        g->removeFromLegend();
        return g;
      };
      QCPGraph* lo = band_graph(*line.band_lo);
      QCPGraph* hi = band_graph(*line.band_hi);
      QColor fill = color;
      fill.setAlpha(55);
      hi->setBrush(fill);
      hi->setChannelFillGraph(lo);
    }
    QCPGraph* graph = plot.addGraph();
    graph->setName(QString::fromStdString(spec.legend ? wrap_legend_label(line.label, width) : line.label));
    graph->setPen(QPen(color, 1.6));
    if (line.points->size() <= 40)
      graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, 4.5));
    graph->setData(keys, values, true);
  }
  style_axis(plot.xAxis, QString::fromStdString(spec.x_label));
  style_axis(plot.yAxis, QString::fromStdString(spec.y_label));
  plot.axisRect()->setupFullAxesBox(false);
  plot.xAxis2->setVisible(false);
  plot.yAxis2->setVisible(false);
  if (std::isfinite(x_lo)) {
    const double pad = x_hi > x_lo ? 0.01 * (x_hi - x_lo) : 1.0;
    plot.xAxis->setRange(x_lo - pad, x_hi + pad);
  }
  plot.yAxis->setRange(value_range(spec));
  for (const ChartMarker& m : spec.markers) {
    if (!(m.step > plot.xAxis->range().lower && m.step < plot.xAxis->range().upper))
      continue;
    auto* line = new QCPItemStraightLine(&plot);
    line->point1->setCoords(m.step, 0);
    line->point2->setCoords(m.step, 1);
    line->setPen(QPen(QColor(0x8a, 0x96, 0xa3), 1, Qt::DashLine));
    auto* text = new QCPItemText(&plot);
    text->position->setTypeX(QCPItemPosition::ptPlotCoords);
    text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    text->position->setCoords(m.step, 0.0);
    text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    text->setPadding(QMargins(3, 1, 0, 0));
    text->setFont(QFont("DejaVu Sans", 7));
    text->setColor(QColor(0x5b, 0x67, 0x75));
    text->setText(QString::fromStdString(m.label));
  }

  if (spec.legend) {
    plot.legend->setVisible(true);
    plot.legend->setFont(QFont("DejaVu Sans", 8));
    plot.legend->setBorderPen(Qt::NoPen);
    plot.legend->setBrush(Qt::NoBrush);
    plot.legend->setIconSize(16, 8);
    plot.legend->setRowSpacing(0);
    plot.legend->setColumnSpacing(10);
    std::vector<std::string> labels;
    for (const ChartLine& line : spec.lines)
      labels.push_back(line.label);
    // The wrap first: setFillOrder rearranges the items already in the legend by it.
    plot.legend->setWrap(legend_columns(labels, width));
    plot.legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
    auto* holder = new QCPLayoutGrid;
    plot.plotLayout()->addElement(2, 0, holder);
    holder->addElement(0, 0, plot.legend);
    holder->setMargins(QMargins(0, 0, 0, 4));
    plot.plotLayout()->setRowStretchFactor(2, 0.001);
  }
  plot.plotLayout()->setRowStretchFactor(0, 0.001);

  const QPixmap pixmap = plot.toPixmap(width, height, scale);
  LATHE_CHECK(!pixmap.isNull(), "rendering the chart of ", spec.title, " failed");
  QByteArray png;
  QBuffer buffer(&png);
  buffer.open(QIODevice::WriteOnly);
  LATHE_CHECK(pixmap.save(&buffer, "PNG"), "encoding the chart of ", spec.title, " as PNG failed");
  return png;
}

}  // namespace lathe::report
