// The Export action: asks for a file (HTML, PDF or CSV by extension) and writes a report of the
// runs with lathe::report::write_report (widgets/report/, built by the report library).
#pragma once

#include <QString>
#include <QStringList>
#include <QWidget>

namespace lathe::app {

/// Interactive: file dialog, then the report; errors in a dialog that says what to do.
void export_runs(QWidget* parent, const QString& dbPath, const QStringList& runIds);
/// Writes the report to `path` (format from the extension). Returns "" or the error text.
QString write_report_file(const QString& dbPath, const QStringList& runIds, const QString& path);
/// The folder the last export went to (QSettings "export/folder"; home when none or gone): the
/// export dialog starts there.
QString last_export_folder();
void remember_export_folder(const QString& folder);

}  // namespace lathe::app
