// The offscreen QApplication set-up (see offscreen_app.h).
#include "widgets/common/offscreen_app.h"

#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace lathe::widgets {

void use_offscreen_platform() {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
    qputenv("QT_QPA_PLATFORM", "offscreen");
  if (qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR")) {
    const std::string runtime = "/tmp/runtime-" + std::to_string(::getuid());
    ::mkdir(runtime.c_str(), 0700);
    qputenv("XDG_RUNTIME_DIR", QByteArray::fromStdString(runtime));
  }
}

QApplication& offscreen_application(const char* name) {
  if (QCoreApplication* existing = QCoreApplication::instance()) {
    if (auto* app = qobject_cast<QApplication*>(existing))
      return *app;
    throw std::logic_error("offscreen_application: a QCoreApplication without widgets already exists");
  }
  use_offscreen_platform();
  static std::string arg0;
  arg0 = name;
  static int argc = 1;
  static char* argv[] = {arg0.data(), nullptr};
  return *new QApplication(argc, argv);
}

}  // namespace lathe::widgets
