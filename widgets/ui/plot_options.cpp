// PlotOptions (see plot_options.h).
#include "widgets/ui/plot_options.h"

#include <QFileDialog>
#include <QInputDialog>
#include <QMessageBox>
#include <QSvgGenerator>
#include <cmath>
#include <stdexcept>

namespace lathe::ui {

void applyPlotOptions(QCustomPlot* plot, const PlotOptions& options) {
  if (options.fixedY) {
    if (!std::isfinite(options.yMin) || !std::isfinite(options.yMax) || options.yMin >= options.yMax)
      throw std::invalid_argument("fixed y range: min must be below max, both finite numbers (got " +
                                  std::to_string(options.yMin) + " .. " + std::to_string(options.yMax) + ")");
    if (options.logY && options.yMin <= 0)
      throw std::invalid_argument("fixed y range: on a log y axis min must be > 0 (got " +
                                  std::to_string(options.yMin) + ")");
  }
  const auto setScale = [](QCPAxis* axis, bool log) {
    const bool isLog = axis->scaleType() == QCPAxis::stLogarithmic;
    if (log == isLog)
      return;
    axis->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (log)
      axis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog));
    else
      axis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  };
  setScale(plot->xAxis, options.logX);
  setScale(plot->yAxis, options.logY);
  if (options.fixedY)
    plot->yAxis->setRange(options.yMin, options.yMax);
}

void padAxis(QCPAxis* axis, double fraction) {
  const QCPRange r = axis->range();
  if (axis->scaleType() == QCPAxis::stLogarithmic) {
    if (r.lower <= 0 || r.upper <= 0)
      return;
    const double f = std::pow(r.upper / r.lower, fraction);
    axis->setRange(r.lower / (f > 1 ? f : 1.2), r.upper * (f > 1 ? f : 1.2));
    return;
  }
  const double w = r.size() > 0 ? r.size() * fraction : std::max(1e-9, std::abs(r.center()) * 0.05 + 1e-9);
  axis->setRange(r.lower - w, r.upper + w);
}

int dropUnplottable(QVector<double>& x, QVector<double>& y, bool logX, bool logY) {
  int kept = 0;
  const int n = static_cast<int>(std::min(x.size(), y.size()));
  for (int i = 0; i < n; ++i) {
    const bool bad = std::isnan(x[i]) || std::isnan(y[i]) || (logX && x[i] <= 0) || (logY && y[i] <= 0);
    if (bad)
      continue;
    x[kept] = x[i];
    y[kept] = y[i];
    ++kept;
  }
  x.resize(kept);
  y.resize(kept);
  return n - kept;
}

QString hiddenPointsNote(int hidden) {
  if (hidden <= 0)
    return {};
  return QString("%1 point%2 <= 0 not shown on the log axis").arg(hidden).arg(hidden == 1 ? "" : "s");
}

void addHiddenNote(QCustomPlot* plot, int hidden) {
  if (hidden <= 0)
    return;
  auto* note = new QCPItemText(plot);
  note->setObjectName("hiddenNote");
  note->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
  note->position->setType(QCPItemPosition::ptAxisRectRatio);
  note->position->setCoords(0.99, 0.98);
  note->setFont(QFont("sans", 7));
  note->setColor(QColor(183, 28, 28));
  note->setText(hiddenPointsNote(hidden));
}

void exportPng(QCustomPlot* plot, const QString& path) {
  if (!plot->savePng(path, plot->width(), plot->height()))
    throw std::runtime_error("writing " + path.toStdString() + ": the PNG could not be written");
}

void exportSvg(QCustomPlot* plot, const QString& path) {
  const int w = plot->width(), h = plot->height();
  {
    QFile probe(path);  // QSvgGenerator says nothing when the file cannot be opened
    if (!probe.open(QIODevice::WriteOnly))
      throw std::runtime_error("writing " + path.toStdString() + ": " + probe.errorString().toStdString());
  }
  QSvgGenerator svg;
  svg.setFileName(path);
  svg.setSize(QSize(w, h));
  svg.setViewBox(QRect(0, 0, w, h));
  svg.setTitle(plot->objectName());
  svg.setDescription("Lathe chart, exported as shown");
  QCPPainter painter;
  if (!painter.begin(&svg))
    throw std::runtime_error("writing " + path.toStdString() + ": the SVG could not be started");
  plot->toPainter(&painter, w, h);
  painter.end();
}

void addPlotOptionsActions(QMenu* menu, QCustomPlot* plot, const PlotOptions& current,
                           const std::function<void(const PlotOptions&)>& apply) {
  QAction* logX = menu->addAction("Log x axis");
  logX->setObjectName("logX");
  logX->setCheckable(true);
  logX->setChecked(current.logX);
  QObject::connect(logX, &QAction::toggled, menu, [apply, current](bool on) {
    PlotOptions o = current;
    o.logX = on;
    apply(o);
  });
  QAction* logY = menu->addAction("Log y axis");
  logY->setObjectName("logY");
  logY->setCheckable(true);
  logY->setChecked(current.logY);
  QObject::connect(logY, &QAction::toggled, menu, [apply, current](bool on) {
    PlotOptions o = current;
    o.logY = on;
    if (on && o.fixedY && o.yMin <= 0)  // a fixed range a log axis cannot show goes back to auto
      o.fixedY = false;
    apply(o);
  });
  menu->addSeparator();
  QAction* autoY = menu->addAction("Auto y range");
  autoY->setObjectName("autoY");
  autoY->setCheckable(true);
  autoY->setChecked(!current.fixedY);
  QObject::connect(autoY, &QAction::triggered, menu, [apply, current]() {
    PlotOptions o = current;
    o.fixedY = false;
    apply(o);
  });
  QAction* fixedY = menu->addAction("Fixed y range...");
  fixedY->setObjectName("fixedY");
  QObject::connect(fixedY, &QAction::triggered, menu, [apply, current, plot]() {
    const QCPRange shown = plot->yAxis->range();
    bool ok = false;
    const double lo = QInputDialog::getDouble(plot, "Fixed y range", "y min:", shown.lower, -1e300, 1e300, 6, &ok);
    if (!ok)
      return;
    const double hi = QInputDialog::getDouble(plot, "Fixed y range", "y max:", shown.upper, -1e300, 1e300, 6, &ok);
    if (!ok)
      return;
    PlotOptions o = current;
    o.fixedY = true;
    o.yMin = lo;
    o.yMax = hi;
    try {
      applyPlotOptions(plot, o);  // refused here, before the caller keeps it
    } catch (const std::exception& e) {
      QMessageBox::warning(plot, "Fixed y range", e.what());
      return;
    }
    apply(o);
  });
  menu->addSeparator();
  const QString base = plot->objectName().section(':', -1).trimmed().replace('/', '_').replace(' ', '_');
  QAction* png = menu->addAction("Export PNG...");
  png->setObjectName("exportPng");
  QObject::connect(png, &QAction::triggered, menu, [plot, base]() {
    const QString path = QFileDialog::getSaveFileName(plot, "Export chart as PNG", base + ".png", "PNG (*.png)");
    if (path.isEmpty())
      return;
    try {
      exportPng(plot, path);
    } catch (const std::exception& e) {
      QMessageBox::warning(plot, "Export PNG", e.what());
    }
  });
  QAction* svg = menu->addAction("Export SVG...");
  svg->setObjectName("exportSvg");
  QObject::connect(svg, &QAction::triggered, menu, [plot, base]() {
    const QString path = QFileDialog::getSaveFileName(plot, "Export chart as SVG", base + ".svg", "SVG (*.svg)");
    if (path.isEmpty())
      return;
    try {
      exportSvg(plot, path);
    } catch (const std::exception& e) {
      QMessageBox::warning(plot, "Export SVG", e.what());
    }
  });
}

std::vector<std::pair<double, double>> pairByStep(const std::vector<Point>& xSeries,
                                                  const std::vector<Point>& ySeries) {
  std::vector<std::pair<double, double>> out;
  out.reserve(ySeries.size());
  size_t j = 0;  // the first x sample past the y sample's step
  for (const Point& y : ySeries) {
    while (j < xSeries.size() && xSeries[j].step <= y.step)
      ++j;
    if (j == 0)
      continue;  // no x logged yet
    const double x = xSeries[j - 1].value;
    if (std::isnan(x) || std::isnan(y.value))
      continue;
    out.emplace_back(x, y.value);
  }
  return out;
}

}  // namespace lathe::ui
