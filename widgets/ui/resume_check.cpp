// check_resumable (see resume_check.h).
#include "widgets/ui/resume_check.h"

#include <nlohmann/json.hpp>

#include "engine/store/store.h"

namespace lathe::ui {

ResumeCheck check_resumable(const QString& dbPath, const QStringList& selectedRunIds) {
  if (selectedRunIds.size() != 1)
    return {false, "Select one interrupted or cancelled run to resume it"};
  const QString& id = selectedRunIds.front();
  try {
    Store::OpenOptions opt;
    opt.reap_stale = false;
    Store store = Store::open(dbPath.toStdString(), opt);
    const RunRecord run = store.run(id.toStdString());
    if (run.status != RunStatus::interrupted && run.status != RunStatus::cancelled)
      return {false, QString("Run %1 is %2: only interrupted or cancelled runs can be resumed")
                         .arg(id.left(8), QString::fromStdString(std::string(status_name(run.status))))};
    bool checkpoint = false;
    for (const ArtifactRecord& a : store.artifacts(run.id))
      checkpoint = checkpoint || a.kind == "checkpoint";
    if (!checkpoint)
      for (const EventRecord& e : store.events(run.id))
        checkpoint = checkpoint || e.kind == "checkpoint";
    if (!checkpoint)
      return {false, QString("Run %1 has no checkpoint to resume from (set checkpoint.every_steps or "
                             "checkpoint.every_min); use Re-run to start it again")
                         .arg(id.left(8))};
    // A data-parallel run resumes on its ranks again (lathe-cli resume starts them).
    int devices = 1;
    try {
      const nlohmann::json cfg = nlohmann::json::parse(run.config_json);
      if (cfg.contains("compute") && cfg["compute"].is_object())
        devices = cfg["compute"].value("devices", 1);
    } catch (const std::exception&) {
    }
    return {true, QString("Continue run %1 from its newest checkpoint (lathe-cli resume%2): same run, the step "
                          "axis goes on")
                      .arg(id.left(8), devices > 1 ? QString(", on its %1 ranks").arg(devices) : QString())};
  } catch (const std::exception& e) {
    return {false, QString("Cannot read run %1: %2").arg(id.left(8), e.what())};
  }
}

}  // namespace lathe::ui
