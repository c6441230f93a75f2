// RunOverview (see run_overview.h).
#include "app/gui/run_overview.h"

#include <QDesktopServices>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QUrl>
#include <QVBoxLayout>

#include "app/gui/model_export_action.h"
#include "engine/store/store.h"
#include "widgets/report/report_data.h"
#include "widgets/report/report_html.h"

namespace lathe::app {

RunOverview::RunOverview(QString dbPath, QWidget* parent) : QWidget(parent), m_db(std::move(dbPath)) {
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(2, 2, 2, 2);
  auto* row = new QHBoxLayout;
  m_title = new QLabel("Double-click a run in Runs to see its overview.", this);
  m_title->setObjectName("overviewTitle");
  m_title->setWordWrap(true);
  m_openFolder = new QPushButton("Open run folder", this);
  m_openFolder->setObjectName("openRunFolder");
  m_openFolder->setEnabled(false);
  m_exportModel = new QPushButton("Export model (ONNX)...", this);
  m_exportModel->setObjectName("overviewExportModel");
  m_exportModel->setEnabled(false);
  row->addWidget(m_title, 1);
  row->addWidget(m_exportModel);
  row->addWidget(m_openFolder);
  column->addLayout(row);
  m_view = new QTextBrowser(this);
  m_view->setObjectName("runOverview");
  m_view->setOpenExternalLinks(false);
  column->addWidget(m_view, 1);
  connect(m_openFolder, &QPushButton::clicked, this, [this]() {
    if (!m_folder.isEmpty())
      QDesktopServices::openUrl(QUrl::fromLocalFile(m_folder));
  });
  connect(m_exportModel, &QPushButton::clicked, this, [this]() {
    if (!m_runId.isEmpty())
      export_model(this, m_db, m_runId);
  });
}

bool RunOverview::showRun(const QString& runId) {
  m_runId = runId;
  m_folder.clear();
  try {
    Store::OpenOptions opt;
    opt.reap_stale = false;
    const Store store = Store::open(m_db.toStdString(), opt);
    const report::ReportData data = report::collect_report_data(store, {runId.toStdString()});
    m_html = QString::fromStdString(report::build_report_html(data, {}, report::HtmlFlavor::print));
    for (const ArtifactRecord& a : data.runs[0].artifacts) {
      const QFileInfo file(QString::fromStdString(a.path));
      if (file.exists()) {
        m_folder = file.absolutePath();
        break;
      }
    }
    const RunRecord& r = data.runs[0].record;
    m_title->setText(QString("<b>%1</b> &middot; %2 &middot; %3")
                         .arg(QString::fromStdString(r.name).toHtmlEscaped(), QString::fromStdString(r.id),
                              QString::fromStdString(std::string(status_name(r.status)))));
  } catch (const std::exception& e) {
    m_html =
        "<p>Cannot read run " + runId.toHtmlEscaped() + ": " + QString::fromUtf8(e.what()).toHtmlEscaped() + "</p>";
    m_title->setText("Run " + runId);
    m_view->setHtml(m_html);
    m_openFolder->setEnabled(false);
    m_exportModel->setEnabled(false);
    return false;
  }
  m_view->setHtml(m_html);
  m_openFolder->setEnabled(!m_folder.isEmpty());
  m_openFolder->setToolTip(m_folder.isEmpty() ? "This run wrote no files on this machine" : m_folder);
  m_exportModel->setEnabled(true);  // the dialog lists what the run has (and why not the rest)
  return true;
}

}  // namespace lathe::app
