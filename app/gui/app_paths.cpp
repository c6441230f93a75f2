// findLatheCli / findExperimentsDir / defaultStorePath (see app_paths.h).
#include "app/gui/app_paths.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

#include "engine/store/store.h"

namespace lathe::app {

QString findLatheCli() {
  const QString env = qEnvironmentVariable("LATHE_CLI");
  if (!env.isEmpty() && QFileInfo(env).isExecutable())
    return env;
  const QDir here(QCoreApplication::applicationDirPath());
  for (const QString& candidate : {here.filePath("lathe-cli"), here.filePath("../lathe-cli")})
    if (QFileInfo(candidate).isExecutable())
      return QFileInfo(candidate).canonicalFilePath();
  return QStandardPaths::findExecutable("lathe-cli");
}

QString findExperimentsDir() {
  const QString env = qEnvironmentVariable("LATHE_EXPERIMENTS_DIR");
  if (!env.isEmpty() && QFileInfo(env).isDir())
    return env;
  QDir dir(QCoreApplication::applicationDirPath());
  for (int up = 0; up < 6; ++up) {
    if (dir.exists("experiments/default.json"))
      return dir.absoluteFilePath("experiments");
    if (!dir.cdUp())
      break;
  }
#ifdef LATHE_SOURCE_DIR
  const QString source = QString(LATHE_SOURCE_DIR) + "/experiments";
  if (QFileInfo(source).isDir())
    return source;
#endif
  return {};
}

QString defaultStorePath() { return QString::fromStdString(Store::default_path()); }

}  // namespace lathe::app
