// Whether the Runs tab may offer Resume for a run: `lathe-cli resume` continues an interrupted or
// cancelled run from its newest checkpoint, so the run must have that status and at least one
// checkpoint (a `checkpoint` artifact or event in the store). When it may not, `why` says so in
// words for the button's tooltip.
#pragma once

#include <QString>
#include <QStringList>

namespace lathe::ui {

struct ResumeCheck {
  bool ok = false;
  QString why;  ///< the tooltip: what Resume does, or why it is off
};

/// Reads the run row, its artifacts and events (one run, synchronously).
ResumeCheck check_resumable(const QString& dbPath, const QStringList& selectedRunIds);

}  // namespace lathe::ui
