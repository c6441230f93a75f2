// ChartPanel (see chart_panel.h).
#include "widgets/ui/chart_panel.h"

#include <QContextMenuEvent>
#include <QHBoxLayout>
#include <QMenu>
#include <QSettings>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace lathe::ui {
namespace {

/// Step, Epoch, Wall time, Dollars: the chooser's first items; the run's metrics follow.
constexpr int kFixedModes = 4;

QString settingsKey(const QString& preset) { return "liveCharts/" + (preset.isEmpty() ? QString("(none)") : preset); }

/// The rank of "dist/rank<i>/<what>", or -1 for any other metric.
int rankOf(const std::string& metric, const std::string& what) {
  const std::string prefix = "dist/rank", suffix = "/" + what;
  if (metric.rfind(prefix, 0) != 0 || metric.size() <= prefix.size() + suffix.size() ||
      metric.compare(metric.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = metric.substr(prefix.size(), metric.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoi(digits);
}

/// Why the Cost chart of an instance with no hourly price stays at $0 (the started event's fields).
QString unpricedNote(const nlohmann::json& started) {
  const QString instance = QString::fromStdString(started.value("instance", std::string("local")));
  const QString source = QString::fromStdString(started.value("price_source", std::string()));
  return QString("cost.instance \"%1\"%2\nhas no hourly price: this run costs $0.\nSet cost.instance to count dollars.")
      .arg(instance, source.isEmpty() ? QString() : " (" + source + ")");
}

/// Why the Cost chart's dollars are a projection: the run is timed on a device that is not the
/// priced instance's (the started event's cost_projection, said in two short lines).
QString projectionNote(const nlohmann::json& started) {
  const QString instance = QString::fromStdString(started.value("instance", std::string()));
  const QString device = QString::fromStdString(started.value("device", std::string()));
  return QString("Projected: this run's wall time at %1's price;\nit ran on %2, not on that instance")
      .arg(instance, device);
}

}  // namespace

ChartPanel::ChartPanel(QWidget* parent) : QWidget(parent) {
  auto* column = new QVBoxLayout(this);
  auto* controls = new QHBoxLayout;
  m_title = new QLabel("No run yet: press Run, or pick a run in Runs and choose Watch.", this);
  m_title->setObjectName("liveTitle");
  controls->addWidget(m_title, 1);
  controls->addWidget(new QLabel("X axis:", this));
  m_xMode = new QComboBox(this);
  m_xMode->setObjectName("xAxisMode");
  m_xMode->addItems({"Step", "Epoch", "Wall time", "Dollars"});
  controls->addWidget(m_xMode);
  m_logX = new QCheckBox("Log x", this);
  m_logX->setObjectName("logX");
  m_logY = new QCheckBox("Log y", this);
  m_logY->setObjectName("logY");
  m_logY->setToolTip(
      "Log axes on every chart (points <= 0 are left out and counted in the chart's corner); "
      "right-click a chart for its own options, a fixed y range and PNG / SVG export");
  m_logX->setToolTip(m_logY->toolTip());
  controls->addWidget(m_logX);
  controls->addWidget(m_logY);
  controls->addWidget(new QLabel("Smoothing:", this));
  m_smooth = new QSlider(Qt::Horizontal, this);
  m_smooth->setObjectName("smoothing");
  m_smooth->setRange(0, 99);
  m_smooth->setValue(60);
  m_smooth->setMaximumWidth(140);
  m_smooth->setToolTip("EMA smoothing drawn over the raw line (0 = raw only)");
  controls->addWidget(m_smooth);
  m_smoothLabel = new QLabel("0.60", this);
  controls->addWidget(m_smoothLabel);
  m_addButton = new QToolButton(this);
  m_addButton->setObjectName("addChart");
  m_addButton->setText("Add chart");
  m_addButton->setToolTip(
      "Chart any other metric of the run (remembered for this preset; right-click a chart to remove it)");
  m_addButton->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(m_addButton);
  m_addButton->setMenu(menu);
  connect(menu, &QMenu::aboutToShow, this, [this, menu]() {
    menu->clear();
    const QStringList metrics = addableMetrics();
    if (metrics.isEmpty())
      menu->addAction("(no other metric logged yet)")->setEnabled(false);
    for (const QString& m : metrics)
      menu->addAction(m, this, [this, m]() { addChart(m); });
  });
  controls->addWidget(m_addButton);
  column->addLayout(controls);
  m_error = new QLabel(this);
  m_error->setObjectName("liveError");
  m_error->setWordWrap(true);
  m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_error->setStyleSheet("color: #b71c1c;");
  m_error->hide();
  column->addWidget(m_error);

  auto* grid = new QGridLayout;
  m_grid = grid;
  const std::vector<std::pair<QString, QStringList>> layout = {
      {"Loss", {"train/loss", "test/loss"}},
      {"Accuracy", {"train/accuracy", "test/accuracy"}},
      {"Samples / s", {"train/samples_per_s"}},
      {"Device utilisation and MFU", {"device/util", "device/sm_activity", "device/mfu"}},
      {"Memory (peak)", {"mem/peak_bytes"}},
      {"Cost ($)", {"cost/usd"}}};
  int i = 0;
  for (const auto& [title, metrics] : layout) {
    auto* chart = new LiveChart(title, metrics, this);
    if (metrics.contains("mem/peak_bytes")) {
      chart->setValueScale(1 << 20, "MiB");
      chart->setMinimumSpan(0.2);  // a few MiB on a 330 MiB process is flat, and looks it
    }
    if (metrics.contains("cost/usd"))
      chart->setUnsmoothed("cost/usd");  // cumulative: an average of money spent means nothing
    chart->setMinimumSize(260, 170);
    grid->addWidget(chart, i / 3, i % 3);
    m_charts.push_back(chart);
    ++i;
  }
  m_fixedCharts = m_charts.size();
  column->addLayout(grid, 1);

  connect(m_xMode, &QComboBox::currentIndexChanged, this, [this](int index) {
    if (index < 0)
      return;
    if (index < kFixedModes)
      setXMode(static_cast<XMapping::Mode>(index));
    else
      setXMetric(m_xMode->itemText(index));
  });
  connect(m_logX, &QCheckBox::toggled, this, [this]() { setLogAxes(m_logX->isChecked(), m_logY->isChecked()); });
  connect(m_logY, &QCheckBox::toggled, this, [this]() { setLogAxes(m_logX->isChecked(), m_logY->isChecked()); });
  connect(m_smooth, &QSlider::valueChanged, this, [this](int v) { setSmoothing(v / 100.0); });
  setSmoothing(0.6);
  m_replotTimer.setInterval(33);
  connect(&m_replotTimer, &QTimer::timeout, this, [this]() { refreshSome(2); });
  m_replotTimer.start();
}

LiveChart* ChartPanel::chartFor(const std::string& metric) const {
  for (LiveChart* c : m_charts)
    if (c->hasMetric(metric))
      return c;
  return nullptr;
}

QString ChartPanel::presetOf(const QString& runName) {
  QString base = runName;
  const int rerun = base.indexOf(" (re-run of ");
  if (rerun >= 0)
    base = base.left(rerun);
  QStringList words = base.split(' ', Qt::SkipEmptyParts);
  while (!words.isEmpty() && words.back().contains('='))  // sweep_run_name's knob=value tokens
    words.removeLast();
  return words.join(' ');
}

QStringList ChartPanel::addableMetrics() const {
  QStringList out;
  for (const auto& [metric, points] : m_unshown)
    out << QString::fromStdString(metric);
  return out;  // std::map: sorted
}

QStringList ChartPanel::addedMetrics() const {
  QStringList out;
  for (size_t i = m_fixedCharts; i < m_charts.size(); ++i)
    out << m_charts[i]->metrics().value(0);
  return out;
}

LiveChart* ChartPanel::makeAddedChart(const QString& metric) {
  if (LiveChart* existing = chartFor(metric.toStdString()))
    return existing;
  auto* chart = new LiveChart(metric, {metric}, this);
  chart->setMinimumSize(260, 170);
  prepareLateChart(chart);
  connect(chart, &LiveChart::contextMenuBuilt, this, [this, metric](QMenu* menu) {
    menu->addSeparator();
    menu->addAction("Remove chart " + metric, this, [this, metric]() { removeChart(metric); })
        ->setObjectName("removeChart");
  });
  m_charts.push_back(chart);
  auto it = m_unshown.find(metric.toStdString());
  if (it != m_unshown.end()) {
    chart->append(it->first, it->second);
    m_unshown.erase(it);
  }
  layoutCharts();
  return chart;
}

LiveChart* ChartPanel::addChart(const QString& metric) {
  LiveChart* chart = makeAddedChart(metric);
  rememberAdded();
  return chart;
}

bool ChartPanel::removeChart(const QString& metric) {
  for (size_t i = m_fixedCharts; i < m_charts.size(); ++i)
    if (m_charts[i]->hasMetric(metric.toStdString())) {
      LiveChart* chart = m_charts[i];
      m_charts.erase(m_charts.begin() + static_cast<std::ptrdiff_t>(i));
      m_grid->removeWidget(chart);
      chart->deleteLater();
      m_unshown[metric.toStdString()];  // offered again (its points come with the next run)
      m_nextChart = 0;
      layoutCharts();
      rememberAdded();
      return true;
    }
  return false;
}

void ChartPanel::rememberAdded() const { QSettings("lathe", "lathe").setValue(settingsKey(m_preset), addedMetrics()); }

void ChartPanel::layoutCharts() {
  for (size_t i = 0; i < m_charts.size(); ++i)
    m_grid->addWidget(m_charts[i], static_cast<int>(i / 3), static_cast<int>(i % 3));
}

void ChartPanel::ensureRankCharts(const TailBatch& batch) {
  if (!m_rankCharts.empty())
    return;
  int world = 0;
  for (const auto& [metric, points] : batch.series)
    world = std::max(world, rankOf(metric, "samples_per_s") + 1);
  if (world == 0)
    return;
  QStringList rates, shares{"dist/comm_fraction"};
  for (int r = 0; r < world; ++r) {
    rates << QString("dist/rank%1/samples_per_s").arg(r);
    shares << QString("dist/rank%1/util").arg(r);
  }
  auto* rateChart = new LiveChart("Samples / s per rank", rates, this);
  auto* shareChart = new LiveChart("Communication and rank utilisation", shares, this);
  shareChart->setToolTip(
      "dist/comm_fraction: the share of each step spent in gradient communication the backward pass did not "
      "hide; dist/rank<i>/util: each CPU rank's busy share of its own threads");
  for (LiveChart* c : {rateChart, shareChart}) {
    c->setMinimumSize(260, 170);
    prepareLateChart(c);
    // Points that came before the charts (an added chart may not hold them: it is not one of these).
    for (const QString& metric : c->metrics())
      if (auto it = m_unshown.find(metric.toStdString()); it != m_unshown.end()) {
        c->append(it->first, it->second);
        m_unshown.erase(it);
      }
    m_charts.insert(m_charts.begin() + static_cast<std::ptrdiff_t>(m_fixedCharts), c);
    ++m_fixedCharts;
    m_rankCharts.push_back(c);
  }
  m_nextChart = 0;
  layoutCharts();
}

void ChartPanel::dropRankCharts() {
  for (LiveChart* c : m_rankCharts) {
    m_charts.erase(std::find(m_charts.begin(), m_charts.end(), c));
    --m_fixedCharts;
    m_grid->removeWidget(c);
    c->deleteLater();
  }
  if (!m_rankCharts.empty()) {
    m_rankCharts.clear();
    m_nextChart = 0;
    layoutCharts();
  }
}

void ChartPanel::prepareLateChart(LiveChart* chart) {
  chart->setXMapping(m_map);
  if (m_map.mode == XMapping::Mode::metric)
    chart->setXMetricPoints(xMetricPoints());
  chart->setSmoothing(m_smooth->value() / 100.0);
  PlotOptions o;
  o.logX = m_logX->isChecked();
  o.logY = m_logY->isChecked();
  chart->setPlotOptions(o);
  for (const MarkerSpec& m : m_markers)
    chart->addMarker(m.step, m.wallMs, m.label, m.color);
}

std::vector<Point> ChartPanel::xMetricPoints() const {
  if (LiveChart* c = chartFor(m_map.metric)) {
    std::vector<Point> out = c->points(m_map.metric);
    for (Point& p : out)  // as stored, like the batches that follow (a chart may show MiB)
      p.value *= c->valueDivisor();
    return out;
  }
  auto it = m_unshown.find(m_map.metric);
  return it == m_unshown.end() ? std::vector<Point>{} : it->second;
}

void ChartPanel::noteMetric(const std::string& metric) {
  const QString name = QString::fromStdString(metric);
  if (m_xMode->findText(name) < 0)
    m_xMode->addItem(name);
}

QStringList ChartPanel::xAxisChoices() const {
  QStringList out;
  for (int i = 0; i < m_xMode->count(); ++i)
    out << m_xMode->itemText(i);
  return out;
}

void ChartPanel::setXMetric(const QString& metric) {
  noteMetric(metric.toStdString());
  m_map.mode = XMapping::Mode::metric;
  m_map.metric = metric.toStdString();
  const int index = m_xMode->findText(metric);
  if (m_xMode->currentIndex() != index) {
    const QSignalBlocker block(m_xMode);
    m_xMode->setCurrentIndex(index);
  }
  const std::vector<Point> xs = xMetricPoints();
  for (LiveChart* c : m_charts) {
    c->setXMetricPoints(xs);
    c->setXMapping(m_map);
  }
}

void ChartPanel::setLogAxes(bool logX, bool logY) {
  if (m_logX->isChecked() != logX || m_logY->isChecked() != logY) {
    const QSignalBlocker bx(m_logX), by(m_logY);
    m_logX->setChecked(logX);
    m_logY->setChecked(logY);
  }
  for (LiveChart* c : m_charts) {
    PlotOptions o = c->plotOptions();
    o.logX = logX;
    o.logY = logY;
    if (logY && o.fixedY && o.yMin <= 0)  // a fixed range a log axis cannot show: back to auto
      o.fixedY = false;
    c->setPlotOptions(o);
  }
}

void ChartPanel::setXMode(XMapping::Mode mode) {
  if (mode == XMapping::Mode::metric) {  // needs a metric: setXMetric
    if (!m_map.metric.empty())
      setXMetric(QString::fromStdString(m_map.metric));
    return;
  }
  m_map.mode = mode;
  if (m_xMode->currentIndex() != static_cast<int>(mode))
    m_xMode->setCurrentIndex(static_cast<int>(mode));
  applyMapping();
}

void ChartPanel::setSmoothing(double alpha) {
  m_smoothLabel->setText(QString::number(alpha, 'f', 2));
  for (LiveChart* c : m_charts)
    c->setSmoothing(alpha);
}

void ChartPanel::applyMapping() {
  for (LiveChart* c : m_charts)
    c->setXMapping(m_map);
}

std::optional<ChartPanel::MarkerSpec> ChartPanel::markerFor(const EventRecord& e) {
  const nlohmann::json& f = e.fields;
  if (!f.is_object())
    return std::nullopt;
  auto number = [&](const char* key, double otherwise) {
    return f.contains(key) && f[key].is_number() ? f[key].get<double>() : otherwise;
  };
  MarkerSpec m;
  if (e.kind == "spot/notice") {
    m.step = static_cast<int64_t>(number("step", -1));
    m.wallMs = number("wall_ms", -1);
    m.label = "spot notice";
  } else if (e.kind == "spot/interruption") {  // the supervisor's record: the step the child reached
    m.step = static_cast<int64_t>(number("step_reached", -1));
    const double at_s = number("at_s", -1);
    m.wallMs = at_s >= 0 ? at_s * 1000.0 : -1;
    m.label = f.value("killed", false) ? "machine lost" : "interrupted";
  } else if (e.kind == "resumed") {
    m.step = static_cast<int64_t>(number("from_step", -1));
    m.label = QString("resumed from %1").arg(m.step);
  } else if (e.kind == "device/warning") {  // GPU-Util and SM activity disagree (gpu_sampler.h)
    m.step = static_cast<int64_t>(number("step", -1));
    m.wallMs = number("wall_ms", -1);
    m.label = QString("GPU-Util %1% vs SM activity %2%")
                  .arg(std::lround(100 * number("gpu_util", 0)))
                  .arg(std::lround(100 * number("sm_activity", 0)));
  } else if (e.kind == "phase") {  // where a stage after the training starts (its curves change there)
    const std::string phase = f.value("phase", std::string());
    m.step = static_cast<int64_t>(number("first_step", -1));
    if (m.step <= 0 || (phase != "prune" && phase != "finetune" && phase != "qat"))
      return std::nullopt;
    m.label = QString::fromStdString(phase);
    m.color = QColor(90, 90, 90);
  } else {
    return std::nullopt;
  }
  if (m.step < 0)
    return std::nullopt;
  return m;
}

void ChartPanel::applyBatch(const TailBatch& batch) {
  bool remap = false;
  if (batch.reset || batch.runId != m_runId) {
    m_runId = batch.runId;
    dropRankCharts();  // the next run may have another world size, or one process
    for (LiveChart* c : m_charts)
      c->clear();
    m_unshown.clear();
    m_markers.clear();
    m_error->clear();
    m_error->hide();
    {
      const QSignalBlocker block(m_xMode);  // the last run's metrics go, except the one chosen as x
      for (int i = m_xMode->count() - 1; i >= kFixedModes; --i)
        if (i != m_xMode->currentIndex())
          m_xMode->removeItem(i);
    }
    // The charts added for this run's preset (a new preset drops the last one's).
    const QString preset = batch.run ? presetOf(QString::fromStdString(batch.run->name)) : QString();
    if (preset != m_preset) {
      m_preset = preset;
      while (m_charts.size() > m_fixedCharts) {
        LiveChart* chart = m_charts.back();
        m_charts.pop_back();
        m_grid->removeWidget(chart);
        chart->deleteLater();
      }
      m_nextChart = 0;
      for (const QString& m : QSettings("lathe", "lathe").value(settingsKey(m_preset)).toStringList())
        makeAddedChart(m);
    }
    m_map.stepsPerEpoch = 0;
    m_map.usdPerHour = 0;
    m_map.priceKnown = false;
    m_epochs = 0;
    m_totalSteps = 0;
    remap = true;
    if (batch.run && !batch.run->config_json.empty()) {
      const auto cfg = nlohmann::json::parse(batch.run->config_json, nullptr, false);
      if (!cfg.is_discarded() && cfg.contains("train"))
        m_epochs = cfg["train"].value("epochs", 0.0);
    }
  }
  for (const EventRecord& e : batch.events)
    if (const std::optional<MarkerSpec> m = markerFor(e)) {
      const bool again = std::any_of(m_markers.begin(), m_markers.end(), [&](const MarkerSpec& o) {
        return e.kind == "phase" && o.step == m->step && o.label == m->label;  // a resume logs its stage again
      });
      if (again)
        continue;
      m_markers.push_back(*m);
      for (LiveChart* c : m_charts)
        c->addMarker(m->step, m->wallMs, m->label, m->color);
    }
  for (const EventRecord& e : batch.events)
    if (e.kind == "started") {
      // The main training's steps (total_steps counts every phase of the pipeline since the plan).
      m_totalSteps = e.fields.value("train_steps", e.fields.value("total_steps", 0.0));
      m_map.usdPerHour = e.fields.value("price_usd_per_hour", 0.0);
      m_map.priceKnown = e.fields.contains("price_usd_per_hour");
      remap = true;
      // $0 all along: say why rather than draw a flat line; priced at an instance the run is not on:
      // say that the dollars are a projection.
      const std::string projection = e.fields.value("cost_projection", std::string());
      if (LiveChart* cost = chartFor("cost/usd")) {
        if (m_map.priceKnown && m_map.usdPerHour <= 0)
          cost->setNote(unpricedNote(e.fields));
        else if (!projection.empty())
          cost->setNote(projectionNote(e.fields), /*topLeft=*/true);
        else
          cost->setNote(QString());
      }
    } else if (e.kind == "status" && e.fields.is_object()) {  // failed with an error; resumed: it goes
      const std::string to = e.fields.value("to", std::string());
      if (to == "failed" && e.fields.contains("error") && e.fields["error"].is_string()) {
        m_error->setText("Failed: " + QString::fromStdString(e.fields["error"].get<std::string>()));
        m_error->show();
      } else if (to == "running") {
        m_error->clear();
        m_error->hide();
      }
    }
  if (remap) {
    m_map.stepsPerEpoch = m_epochs > 0 && m_totalSteps > 0 ? m_totalSteps / m_epochs : 0;
    applyMapping();
  }
  ensureRankCharts(batch);
  for (const auto& [metric, points] : batch.series) {
    noteMetric(metric);
    if (m_map.mode == XMapping::Mode::metric && metric == m_map.metric)
      for (LiveChart* c : m_charts)
        c->appendXMetricPoints(points);
    if (LiveChart* c = chartFor(metric)) {
      c->append(metric, points);
    } else {
      std::vector<Point>& kept = m_unshown[metric];
      kept.insert(kept.end(), points.begin(), points.end());
    }
  }
  if (batch.run) {
    const bool ended = batch.run->status != RunStatus::running && batch.run->status != RunStatus::queued;
    for (LiveChart* c : m_charts)
      c->setRunEnded(ended);
  }
  if (batch.run)
    m_title->setText(QString("%1  (%2, %3)")
                         .arg(QString::fromStdString(batch.run->name), QString::fromStdString(batch.run->id),
                              QString::fromStdString(std::string(status_name(batch.run->status)))));
}

void ChartPanel::refreshNow() {
  for (LiveChart* c : m_charts)
    if (c->dirty()) {
      c->refresh();
      ++m_replots;
    }
}

void ChartPanel::refreshSome(int maxCharts) {
  // Round-robin, so a batch that touches every chart is spread over a few ticks instead of
  // holding the GUI thread for all the replots at once.
  const int n = static_cast<int>(m_charts.size());
  for (int i = 0, done = 0; i < n && done < maxCharts; ++i) {
    LiveChart* c = m_charts[(m_nextChart + i) % n];
    if (!c->dirty())
      continue;
    c->refresh();
    ++m_replots;
    ++done;
    m_nextChart = (m_nextChart + i + 1) % n;
  }
}

}  // namespace lathe::ui
