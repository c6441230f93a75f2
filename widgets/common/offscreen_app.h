// The one offscreen set-up for Qt code that draws without a display (lathe-cli report, the GUI and
// report tests, the GUI bench): the offscreen platform unless QT_QPA_PLATFORM names another, and a
// private XDG_RUNTIME_DIR when none is set (what Qt would pick itself, without its warning).
#pragma once

#include <QApplication>

namespace lathe::widgets {

/// Sets QT_QPA_PLATFORM=offscreen (unless already set) and XDG_RUNTIME_DIR (unless set). Call
/// before the QApplication is made.
void use_offscreen_platform();

/// The process's QApplication: the existing one, or a new offscreen one named `name` that lives
/// until the process ends (Qt objects may outlive the caller). Throws if a non-widget
/// QCoreApplication already exists.
QApplication& offscreen_application(const char* name);

}  // namespace lathe::widgets
