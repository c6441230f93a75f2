// CostPanel (see cost_panel.h).
#include "widgets/ui/cost_panel.h"

#include <qcustomplot.h>

#include <QFile>
#include <QFormLayout>
#include <QTemporaryDir>
#include <QVBoxLayout>
#include <cmath>
#include <optional>

#include "widgets/common/chart_palette.h"
#include "widgets/ui/series_math.h"

namespace lathe::ui {
namespace {

/// Dollars as lathe-cli cost prints them.
QString money(double usd) { return QString::asprintf(usd < 10 ? "$%.4f" : "$%.2f", usd); }

QString duration(double s) { return QString::fromStdString(format_duration(s)); }

}  // namespace

CostPanel::CostPanel(QString cliPath, QWidget* parent) : QWidget(parent), m_cli(std::move(cliPath)) {
  setObjectName("costPanel");
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(0, 0, 0, 0);
  auto* form = new QFormLayout;
  m_lambda = new QDoubleSpinBox(this);
  m_lambda->setObjectName("costInterruptions");
  m_lambda->setRange(0, 3600);
  m_lambda->setDecimals(2);
  m_lambda->setValue(0);
  m_lambda->setToolTip("Spot interruptions per hour (lambda), as lathe-cli cost --interruptions-per-hour");
  m_restart = new QDoubleSpinBox(this);
  m_restart->setObjectName("costRestart");
  m_restart->setRange(0, 86400);
  m_restart->setDecimals(0);
  m_restart->setValue(300);
  m_restart->setSuffix(" s");
  m_restart->setToolTip("Seconds from an interruption until the work goes on again (--restart-s)");
  form->addRow("Spot interruptions / h:", m_lambda);
  form->addRow("Restart after one:", m_restart);
  column->addLayout(form);
  m_summary = new QLabel("(no estimate yet)", this);
  m_summary->setObjectName("costSummary");
  m_summary->setWordWrap(true);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  column->addWidget(m_summary);
  m_plot = new QCustomPlot(this);
  m_plot->setObjectName("costCurve");
  m_plot->setMinimumHeight(130);
  m_plot->xAxis->setLabel("checkpoint interval (min)");
  m_plot->yAxis->setLabel("expected $ on spot");
  m_plot->setVisible(false);
  column->addWidget(m_plot, 1);
  m_status = new QLabel(m_cli.isEmpty() ? "" : "measured by lathe-cli cost when the design is valid", this);
  m_status->setObjectName("costStatus");
  m_status->setWordWrap(true);
  m_status->setStyleSheet("color: #555;");
  column->addWidget(m_status);

  m_debounce.setSingleShot(true);
  m_debounce.setInterval(1500);
  connect(&m_debounce, &QTimer::timeout, this, [this]() { measureNow(); });
  connect(m_lambda, &QDoubleSpinBox::valueChanged, this, [this](double) { recompute(); });
  connect(m_restart, &QDoubleSpinBox::valueChanged, this, [this](double) { recompute(); });
}

CostPanel::~CostPanel() {
  if (m_process) {
    m_process->disconnect(this);
    m_process->kill();
    m_process->waitForFinished(2000);
  }
}

void CostPanel::setConfig(const nlohmann::json& config) {
  if (config == m_config)
    return;
  // The design's own spot scenario (cost.interruptions_per_hour, cost.restart_s: what lathe-cli run
  // simulates) becomes the panel's when the design changes it; between such changes the spin boxes
  // stay the user's to explore. An unset rate is the schema's 0; an unset restart leaves the box.
  const auto knob = [](const nlohmann::json& c, const char* key) -> std::optional<double> {
    if (c.is_object() && c.contains("cost") && c["cost"].is_object() && c["cost"].contains(key) &&
        c["cost"][key].is_number())
      return c["cost"][key].get<double>();
    return std::nullopt;
  };
  const std::optional<double> lambda = knob(config, "interruptions_per_hour"), restart = knob(config, "restart_s");
  if (lambda.value_or(0) != knob(m_config, "interruptions_per_hour").value_or(0))
    m_lambda->setValue(lambda.value_or(0));
  if (restart && restart != knob(m_config, "restart_s"))
    m_restart->setValue(*restart);
  m_config = config;
  if (!m_cli.isEmpty())
    m_debounce.start();
}

void CostPanel::setInterruptionsPerHour(double lambda) { m_lambda->setValue(lambda); }
void CostPanel::setRestartSeconds(double seconds) { m_restart->setValue(seconds); }

bool CostPanel::measureNow() {
  m_debounce.stop();
  if (m_cli.isEmpty() || m_config.is_null())
    return false;
  if (m_process) {
    m_pending = true;  // measured again when this one ends
    return true;
  }
  m_tmp = std::make_unique<QTemporaryDir>();
  const QString path = m_tmp->filePath("design.json");  // lathe-cli cost takes a .json file as a config
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly) || f.write(QByteArray::fromStdString(m_config.dump(2))) < 0) {
    m_status->setText("cannot write the design to " + path);
    return false;
  }
  f.close();
  m_process = new QProcess(this);
  connect(m_process, &QProcess::finished, this, &CostPanel::onFinished);
  m_status->setText("measuring: lathe-cli cost (a few training steps and a checkpoint write on this machine)...");
  m_process->start(m_cli, {"cost", path, "--interruptions-per-hour", QString::number(m_lambda->value(), 'g', 17),
                           "--restart-s", QString::number(m_restart->value(), 'g', 17), "--steps", "10", "--json"});
  return true;
}

void CostPanel::onFinished(int code, QProcess::ExitStatus status) {
  const QByteArray out = m_process->readAllStandardOutput();
  const QString err = QString::fromUtf8(m_process->readAllStandardError()).trimmed();
  m_process->deleteLater();
  m_process = nullptr;
  if (status != QProcess::NormalExit || code != 0) {
    m_status->setText("lathe-cli cost failed: " + err.section('\n', -1));
  } else {
    const auto j = nlohmann::json::parse(out.toStdString(), nullptr, false);
    if (j.is_discarded() || !j.is_object())
      m_status->setText("lathe-cli cost printed no estimate");
    else
      applyMeasurement(j);
  }
  if (m_pending) {
    m_pending = false;
    measureNow();
  }
}

void CostPanel::applyMeasurement(const nlohmann::json& costJson) {
  m_measured = costJson;
  try {
    if (!m_catalog)
      m_catalog = std::make_unique<PriceCatalog>(PriceCatalog::load(PriceCatalog::default_path()));
    m_inputs = CostInputs{};
    m_inputs.instance = &m_catalog->find(costJson.at("instance").get<std::string>());
    m_inputs.devices = costJson.value("devices", 1);
    m_inputs.work_s = costJson.at("work_s").get<double>();
    m_inputs.work_how = costJson.value("work_how", std::string());
    m_inputs.checkpoint_s = costJson.at("checkpoint_s").get<double>();
    m_inputs.checkpoint_how = costJson.value("checkpoint_how", std::string());
    // Short on screen (the "how" names folders of this machine); the whole story in the tooltip.
    m_status->setText(QString("inputs (lathe-cli cost): work %1%2, checkpoint write %3")
                          .arg(duration(m_inputs.work_s),
                               costJson.value("work_projected", false) ? QString(" projected") : QString(),
                               QString::number(m_inputs.checkpoint_s * 1e3, 'f', 1) + " ms"));
    m_status->setToolTip(
        QString::fromStdString("work: " + m_inputs.work_how + "\ncheckpoint: " + m_inputs.checkpoint_how));
  } catch (const std::exception& e) {
    m_inputs.instance = nullptr;
    m_status->setText(QString("cannot use the measurement: ") + e.what());
  }
  recompute();
}

void CostPanel::recompute() {
  if (!m_inputs.instance)
    return;
  m_inputs.interruptions_per_hour = m_lambda->value();
  m_inputs.restart_s = m_restart->value();
  try {
    m_estimate = std::make_unique<CostEstimate>(estimate_cost(m_inputs));  // lathe-cli cost's own call
  } catch (const std::exception& e) {
    m_estimate.reset();
    m_summary->setText(QString("no estimate: ") + e.what());
    return;
  }
  const CostEstimate& e = *m_estimate;
  const InstancePrice& p = *m_inputs.instance;
  QString text = QString("<b>%1</b> (%2/h on-demand, %3/h spot; prices of %4)<br>")
                     .arg(QString::fromStdString(p.name).toHtmlEscaped(), money(p.on_demand_usd_per_hour),
                          money(p.spot_usd_per_hour), QString::fromStdString(p.price_date));
  text += QString("on-demand: %1, <b>%2</b><br>").arg(duration(e.on_demand_wall_s), money(e.on_demand_usd));
  text += QString("spot: %1 without interruptions").arg(money(e.spot_usd_no_interruptions));
  if (m_inputs.interruptions_per_hour > 0) {
    text += QString("; expected %1, <b>%2</b> at %3 interruption(s)/h<br>")
                .arg(duration(e.spot_wall_s), money(e.spot_usd))
                .arg(m_inputs.interruptions_per_hour);
    text += QString("checkpoint every <b>%1</b> (Young, sqrt(2 C M); Daly's %2)")
                .arg(duration(e.young_interval_s), duration(e.daly_interval_s));
  } else {
    text += "<br>(set interruptions per hour for the spot risk and the checkpoint interval)";
  }
  m_summary->setText(text);

  m_plot->clearGraphs();
  m_plot->clearItems();
  m_plot->setVisible(!e.curve.empty());
  if (!e.curve.empty()) {
    QCPGraph* g = m_plot->addGraph();
    g->setPen(QPen(widgets::chart_color(0), 1.5));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, widgets::chart_color(0), 5));
    QVector<double> x, y;
    for (const IntervalCost& c : e.curve) {
      x << c.interval_s / 60;
      y << c.usd;
    }
    g->setData(x, y, true);
    m_plot->xAxis->setScaleType(QCPAxis::stLogarithmic);
    m_plot->xAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    auto* young = new QCPItemStraightLine(m_plot);
    young->setPen(QPen(widgets::chart_color(3), 1, Qt::DashLine));
    young->point1->setCoords(e.young_interval_s / 60, 0);
    young->point2->setCoords(e.young_interval_s / 60, 1);
    m_plot->rescaleAxes();
    m_plot->replot();
  }
  emit updated();
}

}  // namespace lathe::ui
