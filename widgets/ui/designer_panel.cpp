// DesignerPanel (see designer_panel.h).
#include "widgets/ui/designer_panel.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QMessageBox>
#include <QPushButton>
#include <QRegularExpression>
#include <QSaveFile>
#include <QSpinBox>
#include <QStandardPaths>
#include <QVBoxLayout>
#include <algorithm>

#include "engine/core/error.h"
#include "engine/run/config.h"

namespace lathe::ui {

DesignerPanel::DesignerPanel(QString presetsDir, QWidget* parent)
    : QWidget(parent), m_presetsDir(std::move(presetsDir)) {
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(4, 4, 4, 4);
  auto* row = new QHBoxLayout;
  m_presets = new QComboBox(this);
  m_presets->setObjectName("presets");
  m_presets->addItem("Presets...");
  for (const QFileInfo& f : QDir(m_presetsDir).entryInfoList({"*.json"}, QDir::Files, QDir::Name))
    m_presets->addItem(f.completeBaseName(), f.absoluteFilePath());
  auto* open = new QPushButton("Open...", this);
  auto* save = new QPushButton("Save as...", this);
  row->addWidget(m_presets, 1);
  row->addWidget(open);
  row->addWidget(save);
  column->addLayout(row);
  m_fileLabel = new QLabel("(new experiment)", this);
  m_fileLabel->setObjectName("configFile");
  m_fileLabel->setStyleSheet("color: #555;");
  column->addWidget(m_fileLabel);
  m_form = new ExperimentForm(this);
  column->addWidget(m_form, 1);
  m_devicesLabel = new QLabel(this);
  m_devicesLabel->setObjectName("devicesLabel");
  m_devicesLabel->setStyleSheet("color: #555;");
  m_devicesLabel->setWordWrap(true);
  column->addWidget(m_devicesLabel);
  if (FieldEditor* f = m_form->field("compute.devices"))
    f->onEdited(this, [this]() { updateDevicesLabel(); });

  connect(m_presets, &QComboBox::activated, this, [this](int index) {
    if (index > 0)
      loadFile(m_presets->itemData(index).toString());
    m_presets->setCurrentIndex(0);
  });
  connect(open, &QPushButton::clicked, this, [this]() {
    const QString path =
        QFileDialog::getOpenFileName(this, "Open experiment", m_presetsDir, "Experiment JSON (*.json)");
    if (!path.isEmpty())
      loadFile(path);
  });
  connect(m_form, &ExperimentForm::edited, this, [this]() {
    if (!m_modified) {
      m_modified = true;
      updateLabel();
    }
  });
  connect(save, &QPushButton::clicked, this, [this]() {
    const QString path =
        QFileDialog::getSaveFileName(this, "Save experiment", saveAsDefaultPath(), "Experiment JSON (*.json)");
    if (path.isEmpty())
      return;
    const QString err = saveFile(path);
    if (!err.isEmpty())
      QMessageBox::warning(this, "Save experiment", err);
  });
}

QString DesignerPanel::displayPath(const QString& path) const {
  const QString abs = QFileInfo(path).absoluteFilePath();
  const QString presets = m_presetsDir.isEmpty() ? QString() : QFileInfo(m_presetsDir).absoluteFilePath() + "/";
  if (!presets.isEmpty() && abs.startsWith(presets))  // a preset: by the folder's name, as in the repository
    return QDir::toNativeSeparators(QFileInfo(m_presetsDir).fileName() + "/" + abs.mid(presets.size()));
  const QString home = QDir::homePath() + "/";
  if (home.size() > 1 && abs.startsWith(home))
    return QDir::toNativeSeparators("~/" + abs.mid(home.size()));
  return QDir::toNativeSeparators(abs);
}

void DesignerPanel::updateLabel() {
  const QString where = m_file.isEmpty() ? m_origin : displayPath(m_file);
  m_fileLabel->setText(m_modified ? where + "  (modified, not saved)" : where);
  m_fileLabel->setToolTip(m_file.isEmpty() ? QString()
                                           : QDir::toNativeSeparators(QFileInfo(m_file).absoluteFilePath()));
}

bool DesignerPanel::mayDiscardEdits(bool interactive) {
  if (!m_modified || !interactive)
    return true;
  return QMessageBox::question(this, "Discard your edits?",
                               "The experiment in the designer has edits that are not saved. Load another one and "
                               "discard them?",
                               QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Cancel) == QMessageBox::Discard;
}

QString DesignerPanel::saveAsDefaultPath() const {
  const QString name = m_file.isEmpty()
                           ? QString::fromStdString(m_form->config().value("name", std::string("experiment")))
                           : QFileInfo(m_file).completeBaseName();
  const bool preset = !m_file.isEmpty() && !m_presetsDir.isEmpty() &&
                      QFileInfo(m_file).absolutePath() == QFileInfo(m_presetsDir).absoluteFilePath();
  if (!m_file.isEmpty() && !preset)
    return m_file;  // the user's own file: saving over it is what Save as usually means
  QString folder = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
  if (folder.isEmpty() || !QDir(folder).exists())
    folder = QDir::homePath();
  QString safe = name;
  safe.replace(QRegularExpression("[^A-Za-z0-9._=-]+"), "-");
  return QDir(folder).filePath(safe + (preset ? "-copy" : "") + ".json");
}

void DesignerPanel::setConfig(const nlohmann::json& config, const QString& origin) {
  m_form->setConfig(config);
  m_file.clear();
  m_origin = origin;
  m_modified = false;
  updateLabel();
}

QString DesignerPanel::loadFile(const QString& path, bool interactive) {
  if (!mayDiscardEdits(interactive))
    return "kept the edits";
  try {
    m_form->setConfig(load_config_file(path.toStdString()));
    m_file = path;
    m_modified = false;
    updateLabel();
    emit message("Loaded " + displayPath(path));
    return {};
  } catch (const std::exception& e) {
    const QString text =
        QString("%1\n\nPick another file, or fix this one in a text editor (it must be a JSON object).")
            .arg(QString::fromUtf8(e.what()));
    if (interactive)
      QMessageBox::warning(this, "Cannot open the experiment", text);
    return text;
  }
}

QString DesignerPanel::saveFile(const QString& path) {
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly))
    return QString("Cannot write %1: %2. Choose a folder you can write to.").arg(path, f.errorString());
  f.write(QByteArray::fromStdString(m_form->config().dump(2) + "\n"));
  if (!f.commit())
    return QString("Cannot write %1: %2.").arg(path, f.errorString());
  m_file = path;
  m_modified = false;
  updateLabel();
  emit message("Saved " + path);
  return {};
}

void DesignerPanel::setDevices(const nlohmann::json& devices) {
  m_devices = devices;
  FieldEditor* f = m_form->field("compute.devices");
  if (auto* spin = f ? qobject_cast<QSpinBox*>(f->widget()) : nullptr) {
    spin->setRange(1, std::max(1, devices.value("max_devices", 1)));
    spin->setToolTip(f->baseToolTip() + "\nThis machine: at most " + QString::number(spin->maximum()));
  }
  updateDevicesLabel();
}

void DesignerPanel::updateDevicesLabel() {
  if (m_devices.is_null()) {
    m_devicesLabel->clear();
    return;
  }
  QStringList lines;
  if (m_devices.value("kind", std::string()) == "gpu") {
    for (const auto& g : m_devices.value("gpus", nlohmann::json::array()))
      lines << QString("GPU %1: %2, %3 GiB")
                   .arg(g.value("index", 0))
                   .arg(QString::fromStdString(g.value("name", std::string())))
                   .arg(static_cast<double>(g.value("memory_bytes", uint64_t{0})) / (1024.0 * 1024 * 1024), 0, 'f', 0);
  } else {
    const int cores = m_devices.contains("cpu") ? m_devices["cpu"].value("cores", 1) : 1;
    FieldEditor* f = m_form->field("compute.devices");
    const int ranks = f && f->value().is_number_integer() ? std::max(1, f->value().get<int>()) : 1;
    const int threads = std::max(1, cores / ranks);
    lines << QString("CPU ranks: %1 cores, %2 thread%3 each").arg(cores).arg(threads).arg(threads == 1 ? "" : "s");
  }
  m_devicesLabel->setText("compute.devices (at most " + QString::number(m_devices.value("max_devices", 1)) +
                          "): " + lines.join("; "));
}

}  // namespace lathe::ui
