// lathe-cli: the headless runner. `lathe-cli run CONFIG.json [--set key.path=value]... [--json]`
// validates the experiment before any work starts (exit 2 with the JSON path, the bad value and
// what is allowed), then trains with a progress bar (or JSON lines), recording the run in the store
// (--db, default ~/.local/share/lathe/lathe.db) and in runs/<id>/. list/show/compare/export/delete
// read the store and `report` writes HTML/PDF/CSV reports of runs (app/cli_history.cpp); `repair`
// re-imports samples a locked store kept out (app/cli_repair.cpp); `sweep` runs, resumes and submits
// sweeps (app/cli_sweep.cpp, app/cli_slurm.cpp) and `import` merges other stores (app/cli_import.cpp).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>

#include "app/cli_cost.h"
#include "app/cli_devices.h"
#include "app/cli_export_model.h"
#include "app/cli_history.h"
#include "app/cli_importance.h"
#include "app/cli_notes.h"
#include "app/cli_openmp.h"
#include "app/cli_peak.h"
#include "app/cli_ranks.h"
#include "app/cli_repair.h"
#include "app/cli_scaling.h"
#include "app/cli_signals.h"
#include "app/cli_supervisor.h"
#include "app/cli_import.h"
#include "app/cli_sweep.h"
#include "engine/core/error.h"
#include "engine/core/temp_files.h"
#include "engine/run/config.h"
#include "engine/run/config_schema.h"
#include "engine/run/run_dir.h"
#include "engine/run/spot_notice.h"
#include "engine/run/train_checkpoint.h"
#include "engine/run/trainer.h"
#include "engine/store/repair.h"
#include "engine/store/run_model.h"
#include "engine/store/run_writer.h"
#include "engine/store/store.h"

#ifdef LATHE_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/dist/nccl/nccl_communicator.h"
#endif

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_stop_reason{0};  // a lathe::StopReason; lock-free, so the handler may set it
bool g_supervised = false;          // --no-supervise: the spot supervisor's child, which it resumes itself
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

void on_signal(int sig) {
  // kill() may set errno; the thread this handler interrupted may be about to read its own.
  const int saved_errno = errno;
  lathe::cli::forward_signal_to_workers(sig);  // every rank stops
  int none = static_cast<int>(lathe::StopReason::none);
  g_stop_reason.compare_exchange_strong(none, static_cast<int>(lathe::StopReason::signal));
  g_stop.store(true);
  errno = saved_errno;
}

/// SIGUSR1 is the spot supervisor's notice (cli_supervisor.h): like a cloud's, it asks for an
/// emergency checkpoint and an `interrupted` exit.
void on_notice_signal(int) {
  int none = static_cast<int>(lathe::StopReason::none);
  g_stop_reason.compare_exchange_strong(none, static_cast<int>(lathe::StopReason::spot_notice));
  g_stop.store(true);
}

/// Polls the cloud's spot/preemption notice (cost.notice_provider) for the whole run; a notice
/// sets the stop flag with the reason spot_notice: emergency checkpoint, then `interrupted`.
std::unique_ptr<lathe::NoticePoller> start_notice_poller(const lathe::ExperimentConfig& exp, bool json) {
  if (exp.cost.notice_provider == "none")
    return nullptr;
  lathe::NoticePollerOptions o;
  o.provider = exp.cost.notice_provider;
  if (!exp.cost.notice_url.empty())
    o.base_url = exp.cost.notice_url;
  o.interval_s = exp.cost.notice_poll_s;
  return std::make_unique<lathe::NoticePoller>(o, [json](const lathe::SpotNotice& n) {
    int none = static_cast<int>(lathe::StopReason::none);
    g_stop_reason.compare_exchange_strong(none, static_cast<int>(lathe::StopReason::spot_notice));
    g_stop.store(true);
    if (!json)
      std::fprintf(stderr, "\nlathe: %s spot notice (%s%s%s): checkpointing and stopping\n", n.provider.c_str(),
                   n.action.c_str(), n.time.empty() ? "" : " at ", n.time.c_str());
  });
}

/// Prints what a resumed run says about its checkpoint (which one, and any it passed over).
class ResumeMessages final : public lathe::MetricsSink {
 public:
  void sample(const std::string&, int64_t, double, double) override {}
  void event(const std::string& kind, const nlohmann::json& fields) override {
    if (kind != "resumed")
      return;
    for (const auto& m : fields.value("skipped", nlohmann::json::array()))
      std::fprintf(stderr, "lathe: %s\n", m.get<std::string>().c_str());
    std::fprintf(stderr, "lathe: %s\n", fields.value("text", std::string()).c_str());
  }
};

/// Prints every sample and event as one JSON object per line on stdout.
class StdoutJsonSink final : public lathe::MetricsSink {
 public:
  void sample(const std::string& metric, int64_t step, double wall_ms, double value) override {
    nlohmann::json j{{"metric", metric}, {"step", step}, {"wall_ms", wall_ms}};
    j["value"] = std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
    std::cout << j.dump() << '\n';
  }
  void event(const std::string& kind, const nlohmann::json& fields) override {
    nlohmann::json j{{"event", kind}};
    for (auto it = fields.begin(); it != fields.end(); ++it)
      j[it.key()] = it.value();
    std::cout << j.dump() << '\n' << std::flush;
  }
  void flush() override { std::cout << std::flush; }
};

/// `text` as one shell word (single-quoted when it holds anything but safe characters).
std::string shell_quote(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:=@,") ==
                           std::string::npos)
    return text;
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0)
    s = 0;
  const long t = std::lround(s);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%ld:%02ld", t / 60, t % 60);
  }
  return buf;
}

/// A one-line progress bar on a terminal (stderr), redrawn at most 10 times a second.
class ProgressBar {
 public:
  explicit ProgressBar(bool tty) : m_tty(tty) {}
  void update(const lathe::Progress& p) {
    const auto now = std::chrono::steady_clock::now();
    const bool done = p.step == p.total_steps;
    if (m_tty) {
      if (!done && now - m_last < std::chrono::milliseconds(100))
        return;
      m_last = now;
      const int width = 24;
      const double frac = p.total_steps ? static_cast<double>(p.step) / p.total_steps : 0;
      const int filled = static_cast<int>(frac * width);
      std::string bar(filled, '#');
      bar.resize(width, '.');
      char test[32] = "";
      if (p.test_accuracy >= 0)
        std::snprintf(test, sizeof(test), " test %.2f%%", 100 * p.test_accuracy);
      std::fprintf(stderr, "\r[%s] %3.0f%% epoch %d/%d  loss %.4f  acc %.2f%%%s  %.0f samples/s  ETA %s ", bar.c_str(),
                   100 * frac, p.epoch, p.epochs, p.train_loss, 100 * p.train_accuracy, test, p.samples_per_s,
                   format_duration(p.eta_s).c_str());
      std::fflush(stderr);
    } else if (p.evaluations != m_evaluations_printed) {  // one line per evaluation
      m_evaluations_printed = p.evaluations;
      char test[32] = "-";  // an evaluation of another phase's model (a zoo teacher's) has none
      if (p.test_accuracy >= 0)
        std::snprintf(test, sizeof(test), "%.2f%%", 100 * p.test_accuracy);
      std::fprintf(stderr, "epoch %d/%d  train loss %.4f  acc %.2f%%  test acc %s  %.0f samples/s  elapsed %s\n",
                   p.epoch, p.epochs, p.train_loss, 100 * p.train_accuracy, test, p.samples_per_s,
                   format_duration(p.elapsed_s).c_str());
    }
  }
  void finish() {
    if (m_tty)
      std::fprintf(stderr, "\n");
  }

 private:
  bool m_tty;
  int m_evaluations_printed = 0;
  std::chrono::steady_clock::time_point m_last{};
};

/// What `lathe-cli resume` continues: the store's run, its folder and clock.
struct ResumeTarget {
  std::string run_id, run_dir;
  double wall_offset_ms = 0;  ///< the supervisor's clock: restarts and lost work stay on the time axis
  int world_size = 0;         ///< the ranks it trained on (its last dist/world_size; 0 = never logged)
  /// Called once rank 0 has taken the run over in the store (the one live attempt from then on).
  std::function<void()> after_takeover;
};

/// This process's part in a data-parallel run (cli_ranks.h); default: one process.
struct Ranks {
  lathe::cli::RankPlan plan;
  std::unique_ptr<lathe::cli::RankWorkers> workers;  ///< rank 0's workers on this machine
  std::shared_ptr<lathe::Communicator> comm;
  std::string resume_checkpoint_dir;  ///< a worker of a resumed run: the run's checkpoint folder
  bool worker() const { return plan.rank.rank > 0; }
  /// The message a failed run records: a worker's fault when there is one (the rank and how it ended).
  std::string explain(const std::exception& e) const {
    if (!workers || dynamic_cast<const lathe::ConfigError*>(&e) || dynamic_cast<const lathe::DataError*>(&e))
      return e.what();
    const std::string f = workers->wait_fault(2.0);
    return f.empty() || f == e.what() ? e.what() : f + " (rank 0: " + e.what() + ")";
  }
};

int run_or_resume(const lathe::ExperimentConfig& exp, const std::string& label, bool json, const std::string& db,
                  const ResumeTarget* resume, const std::string& run_id = "", Ranks* ranks = nullptr) {
  const bool worker = ranks && ranks->worker();
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  // From here the training thread and the threads it starts never take a stop signal themselves.
  const lathe::cli::StopSignalThread signal_thread;
  StdoutJsonSink json_sink;
  ProgressBar bar(!json && isatty(STDERR_FILENO));
  // The store run is created only once set-up succeeded (on_start), so bad input leaves no trace.
  std::unique_ptr<lathe::RunWriter> writer;
  lathe::FanoutSink sinks;
  if (json && !worker)
    sinks.add(&json_sink);
  ResumeMessages resume_messages;
  lathe::RunOptions opts;
  opts.stop = &g_stop;
  opts.stop_reason = &g_stop_reason;
  opts.extra_sink = &sinks;
  opts.store_path = db;
  opts.run_id = run_id;
  if (ranks) {
    opts.comm = ranks->comm;
    opts.device_index = ranks->plan.device.device_index;
  }
  if (worker) {  // ranks > 0 compute what rank 0 does and write nothing: no store, no run folder
    opts.extra_sink = nullptr;
    opts.store_path.clear();
    opts.write_run_dir = false;
    opts.resume_checkpoint_dir = ranks->resume_checkpoint_dir;
  }
  // "run:<ref>" (distill.teacher) is resolved here, through the store; without one the engine looks
  // in the run folders under output.dir.
  if (!worker && std::filesystem::exists(db))
    opts.resolve_run = [db, runs_root = exp.output.dir](const std::string& ref, const std::string& field) {
      return lathe::find_run_model(db, ref, runs_root, field);
    };
  if (resume) {
    // Take the run over first: refused while its writer lives; samples up to the store's last
    // step of each metric are not written again.
    writer = std::make_unique<lathe::RunWriter>(db);
    const lathe::ResumePoint point = writer->resume(resume->run_id);
    if (resume->after_takeover)
      resume->after_takeover();
    sinks.add(writer.get());
    if (!json)
      sinks.add(&resume_messages);
    opts.run_id = resume->run_id;
    opts.resume_run_dir = resume->run_dir;
    opts.resume_wall_ms = std::max(point.max_wall_ms, resume->wall_offset_ms);
  } else if (!worker)
    opts.on_start = [&](const std::string& id, const std::string& backend, const std::string& device) {
      auto w = std::make_unique<lathe::RunWriter>(db);
      lathe::RunInfo info;
      info.id = id;
      info.name = exp.name;
      info.config = exp.raw;
      info.backend = backend;
      info.devices = {device};
      w->begin_run(info);  // only a begun run is recorded as failed if the run later throws
      writer = std::move(w);
      sinks.add(writer.get());
    };
  if (!worker)
    opts.recorded_peak_flops = [&](const std::string& cpu, int threads) {
      try {
        return lathe::cli::best_recorded_peak_flops(db, cpu, threads);
      } catch (const std::exception& e) {  // a store that cannot be read now only loses the floor
        std::fprintf(stderr, "lathe-cli: warning: no recorded peak from the store (%s)\n", e.what());
        return 0.0;
      }
    };
  lathe::cli::RankWorkers* workers = ranks ? ranks->workers.get() : nullptr;
  if (!json || workers)
    opts.on_progress = [&, workers](const lathe::Progress& p) {
      if (workers)  // a worker that died or hangs ends the run here, between steps
        if (std::string f = workers->fault(); !f.empty())
          throw lathe::Error(f);
      if (!json && !worker)
        bar.update(p);
    };
  if (!json)
    std::fprintf(stderr, "lathe: %s %s (%s)%s\n", resume ? "resuming" : "running", exp.name.c_str(), label.c_str(),
                 ranks && ranks->plan.distributed() ? (" as rank " + std::to_string(ranks->plan.rank.rank) + " of " +
                                                       std::to_string(ranks->plan.rank.world_size))
                                                          .c_str()
                                                    : "");
  const std::unique_ptr<lathe::NoticePoller> poller = start_notice_poller(exp, json);
  lathe::RunSummary s;
  try {
    s = lathe::run_experiment(exp, opts);
  } catch (const std::exception& e) {
    bar.finish();
    const std::string message = ranks ? ranks->explain(e) : e.what();
    if (writer) {
      try {
        writer->finish(lathe::RunStatus::failed, {{"error", message}});
      } catch (const std::exception& store_error) {  // keep the run's own error as the one reported
        std::fprintf(stderr, "lathe-cli: could not record the failure in the store: %s\n", store_error.what());
      }
    }
    if (message != e.what())
      throw lathe::Error(message);
    throw;
  }
  bar.finish();
  if (workers)  // every worker has exited before the run is recorded as done
    if (const std::string f = workers->join(s.status != "finished"); !f.empty()) {
      if (writer)
        writer->finish(lathe::RunStatus::failed, {{"error", f}});
      throw lathe::Error(f);
    }
  const lathe::RunStatus status = s.status == "finished"      ? lathe::RunStatus::finished
                                  : s.status == "interrupted" ? lathe::RunStatus::interrupted
                                                              : lathe::RunStatus::cancelled;
  if (writer && writer->finish(status) == lathe::RunStatus::incomplete)
    std::fprintf(stderr,
                 "lathe-cli: warning: the store stayed locked: %lld sample(s) of run %s are not in it (they are in "
                 "its metrics.jsonl): run `lathe-cli repair %s`\n",
                 static_cast<long long>(writer->unstored_samples()), s.run_id.c_str(), s.run_id.c_str());
  if (!json) {
    // A metric the run did not reach (a run stopped before its first evaluation) reads "-", not "nan%".
    auto metric = [&](const char* k, const char* format, double scale) -> std::string {
      auto it = s.final_metrics.find(k);
      if (it == s.final_metrics.end() || !std::isfinite(it->second))
        return "-";
      char buf[64];
      std::snprintf(buf, sizeof buf, format, scale * it->second);
      return buf;
    };
    // A resumed run's process timed only its own part: say so rather than pass it off as the run's.
    const std::string since = s.resumed_from_step < 0 ? "" : " (since its resume at step " + std::to_string(s.resumed_from_step) + ")";
    std::fprintf(stderr,
                 "lathe: %s run %s in %s%s on %s (%s)\n"
                 "  test accuracy %s  test loss %s  train samples/s %s (mean; last window %s)  MFU %s (mean)"
                 "  model %s bytes  cost %s\n"
                 "  %s\n  recorded in %s\n",
                 s.status.c_str(), s.run_id.c_str(), format_duration(s.elapsed_s).c_str(), since.c_str(), s.backend.c_str(),
                 s.device.c_str(), metric("test/accuracy", "%.2f%%", 100).c_str(),
                 metric("test/loss", "%.4f", 1).c_str(), metric("train/samples_per_s_mean", "%.0f", 1).c_str(),
                 metric("train/samples_per_s", "%.0f", 1).c_str(), metric("device/mfu_mean", "%.1f%%", 100).c_str(),
                 metric("model/bytes", "%.0f", 1).c_str(),
                 (metric("cost/usd", "$%.4f", 1) + (s.cost_projection.empty() ? "" : " (projected: " + s.cost_projection + ")")).c_str(),
                 s.run_dir.empty() ? "" : ("files in " + s.run_dir).c_str(),
                 worker ? "nothing (ranks > 0 leave the store to rank 0)" : db.c_str());
    if (!worker && !g_supervised && s.status != "finished") {  // what next: the work so far is in its checkpoint
      std::string db_arg = " --db " + shell_quote(db);
      try {
        if (db == lathe::Store::default_path())
          db_arg.clear();
      } catch (const std::exception&) {  // no home folder: keep --db
      }
      std::fprintf(stderr, "  continue it with `lathe-cli%s resume %s`\n", db_arg.c_str(), s.run_id.c_str());
    }
  }
  // 75 (EX_TEMPFAIL): interrupted by a spot notice, resumable; 130: cancelled.
  return s.status == "finished" ? 0 : s.status == "interrupted" ? 75 : 130;
}

/// Hidden options of `run` and `resume`, used by the spot supervisor for its children.
struct ChildOptions {
  std::string run_id;
  bool no_supervise = false;
  double wall_offset_ms = 0;
  lathe::cli::RankArgs ranks;         ///< --rank/--world-size/--local-rank/--rendezvous-id
  std::string resume_checkpoint_dir;  ///< --resume-checkpoint-dir: a worker of a resumed data-parallel run
};

/// Knobs the config sets that do nothing for it (config_schema.h: unused_fields), on stderr.
void warn_unused_fields(const nlohmann::json& cfg) {
  for (const std::string& w : lathe::unused_fields(cfg))
    std::fprintf(stderr, "lathe-cli: warning: %s\n", w.c_str());
}

/// Fails at once, before any data is loaded, when the run could not be recorded in `db`: a file
/// that is no lathe store, one this user may not write, a folder, or a path whose folder cannot be
/// made. A store that is not there yet is not created here (a run refused later leaves no store).
void check_store_usable(const std::string& db) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(db, ec)) {
    lathe::Store::open(db);  // DataError naming the file and the reason
    return;
  }
  fs::path dir = fs::absolute(db, ec).parent_path();
  while (!dir.empty() && !fs::exists(dir, ec) && dir != dir.parent_path())
    dir = dir.parent_path();
  if (!fs::is_directory(dir, ec))
    throw lathe::DataError("cannot create the store " + db + ": " + dir.string() + " is not a folder (give --db PATH)");
  if (::access(dir.c_str(), W_OK) != 0)
    throw lathe::DataError("cannot create the store " + db + ": the folder " + dir.string() +
                           " is not writable by this user; give --db a path you may write");
}

int cmd_run(const std::string& config_path, const std::vector<std::string>& sets, bool json, const std::string& db,
            const ChildOptions& child) {
  nlohmann::json cfg = lathe::load_config_file(config_path);
  for (const std::string& s : sets)
    lathe::apply_override(cfg, s);
  lathe::ExperimentConfig exp = lathe::parse_experiment(lathe::validate_config(cfg));
  Ranks ranks;
  const std::string run_id = child.run_id.empty() ? lathe::make_run_id() : child.run_id;
  ranks.plan = lathe::cli::plan_ranks(exp, child.ranks, run_id);
  if (!ranks.plan.rank.note.empty())
    std::fprintf(stderr, "lathe: %s\n", ranks.plan.rank.note.c_str());
  ranks.resume_checkpoint_dir = child.resume_checkpoint_dir;
  if (ranks.plan.rank.rank == 0 && child.run_id.empty())  // once: not again from workers or a supervised child
    warn_unused_fields(cfg);
  if (ranks.plan.rank.rank == 0)
    check_store_usable(db);
  if (exp.cost.interruptions_per_hour > 0 && !child.no_supervise) {
    // The supervisor plays the cloud for the whole machine: its child is rank 0, which starts the
    // other ranks as usual; a restart is `resume`, which starts them all again. Ranks a launcher
    // started (on other machines, maybe) are not its to kill or restart.
    if (ranks.plan.rank.launched()) {
      char lambda[32];
      std::snprintf(lambda, sizeof lambda, "%g", exp.cost.interruptions_per_hour);
      throw lathe::ConfigError(
          "cost.interruptions_per_hour: " + std::string(lambda) + ", but " +
          (ranks.plan.rank.source == "flags" ? std::string("--rank/--world-size") : ranks.plan.rank.source) +
          " started this rank (" + std::to_string(ranks.plan.rank.rank) + " of " +
          std::to_string(ranks.plan.rank.world_size) +
          "): the spot simulation restarts every rank of a run itself, which it can do only for the ranks "
          "lathe-cli starts on one machine (compute.devices = N, no launcher); set cost.interruptions_per_hour "
          "to 0 under a launcher");
    }
    lathe::cli::SupervisorSetup sup;
    sup.db = db;
    sup.run_id = run_id;  // a sweep member's planned id, or a new one
    sup.json = json;
    sup.run_args = {"--db", db, "run", config_path};
    for (const std::string& s : sets)
      sup.run_args.insert(sup.run_args.end(), {"--set", s});
    if (json)
      sup.run_args.push_back("--json");
    return lathe::cli::supervise_spot_run(exp, sup);
  }
  if (ranks.plan.distributed()) {
    exp.train.threads = ranks.plan.threads;
    exp.raw["train"]["threads"] = ranks.plan.threads;
    // Workers are never supervised: a supervised run's rank 0 is the supervisor's child already.
    std::vector<std::string> run_args = {"--db", db, "run", std::filesystem::absolute(config_path).string(),
                                         "--no-supervise"};
    for (const std::string& s : sets)
      run_args.insert(run_args.end(), {"--set", s});
    ranks.workers = std::make_unique<lathe::cli::RankWorkers>(ranks.plan, run_args, exp.compute.timeout_s, &g_stop);
    try {
      ranks.comm = lathe::cli::connect_ranks(ranks.plan, exp);
    } catch (const std::exception& e) {
      throw lathe::Error(ranks.explain(e));
    }
    return run_or_resume(exp, config_path, json, db, nullptr, run_id, &ranks);
  }
  return run_or_resume(exp, config_path, json, db, nullptr, child.run_id);
}

/// Removes the folders of earlier resumes (`resume-*`) from a run's <run id>.ranks folder, all but
/// `keep`. Called once this resume has met its ranks and taken the run over in the store: every
/// earlier attempt has ended by then (a live one keeps the run `running`, and no second resume
/// gets past that), so what is left of them is stale rendezvous keys and the worker logs of an
/// attempt that was kept until now for its failure, if it failed (its error named that log).
void remove_earlier_resume_folders(const std::filesystem::path& ranks_root, const std::filesystem::path& keep) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ranks_root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("resume-", 0) != 0 || e.path() == keep || !e.is_directory(ec))
      continue;
    std::error_code rm;
    std::filesystem::remove_all(e.path(), rm);
    if (rm)
      std::fprintf(stderr, "lathe-cli: warning: could not remove the earlier resume's folder %s: %s\n",
                   e.path().c_str(), rm.message().c_str());
  }
}

/// Resumes a data-parallel run on this machine: its ranks again (compute.devices), meeting under a
/// new rendezvous id (the old one's keys are stale), each continuing from the newest valid
/// checkpoint of the run's folder, which rank 0 wrote and every rank must pick alike. The workers
/// run the config the run folder holds. Their logs (and, with the default store, the rendezvous)
/// go in <run id>.ranks/resume-<pid>/ beside the run folder; once this resume has met and taken
/// the run over, the folders of earlier resumes go: the newest attempt's logs are kept, one folder.
int resume_ranks(lathe::ExperimentConfig exp, bool json, const std::string& db, ResumeTarget target) {
  const std::string config = target.run_dir + "/config.json";
  if (!std::filesystem::exists(config))
    throw lathe::DataError("run " + target.run_id + ": " + config +
                           " is gone, and the ranks of a data-parallel run start from it");
  const std::string rendezvous_id = (exp.compute.rendezvous_id.empty() ? target.run_id : exp.compute.rendezvous_id) +
                                    ".resume-" + std::to_string(getpid());
  exp.compute.rendezvous_id = rendezvous_id;
  const std::filesystem::path ranks_root =
      std::filesystem::absolute(std::filesystem::path(target.run_dir).parent_path() / (target.run_id + ".ranks"));
  const std::filesystem::path resume_dir = ranks_root / ("resume-" + std::to_string(getpid()));
  if (exp.compute.rendezvous.empty())  // the default store: in this resume's folder too
    exp.compute.rendezvous = resume_dir.string();
  Ranks ranks;
  ranks.plan = lathe::cli::plan_ranks(exp, {}, target.run_id);
  ranks.plan.ranks_dir = resume_dir.string();  // the worker logs, whatever the rendezvous
  if (!ranks.plan.distributed() || ranks.plan.rank.rank != 0)
    throw lathe::ConfigError("compute.devices: " + std::to_string(exp.compute.devices) +
                             ": `lathe-cli resume` restarts the ranks of a run on this machine only (this "
                             "process is rank " +
                             std::to_string(ranks.plan.rank.rank) + " of " +
                             std::to_string(ranks.plan.rank.world_size) + " by " + ranks.plan.rank.source + ")");
  exp.train.threads = ranks.plan.threads;
  const std::string ckpt_dir = lathe::checkpoint_dir(exp, target.run_id, target.run_dir);
  const std::vector<std::string> run_args = {"--db",
                                             db,
                                             "run",
                                             config,
                                             "--run-id",
                                             target.run_id,
                                             "--no-supervise",
                                             "--resume-checkpoint-dir",
                                             ckpt_dir,
                                             "--set",
                                             "compute.rendezvous_id=" + rendezvous_id,
                                             "--set",
                                             "compute.rendezvous=" + exp.compute.rendezvous};
  ranks.workers = std::make_unique<lathe::cli::RankWorkers>(ranks.plan, run_args, exp.compute.timeout_s, &g_stop);
  try {
    ranks.comm = lathe::cli::connect_ranks(ranks.plan, exp);
  } catch (const std::exception& e) {
    throw lathe::Error(ranks.explain(e));
  }
  target.after_takeover = [ranks_root, resume_dir] { remove_earlier_resume_folders(ranks_root, resume_dir); };
  return run_or_resume(exp, "run " + target.run_id, json, db, &target, "", &ranks);
}

/// Resumes a data-parallel run whose ranks a launcher (srun, torchrun, or --rank/--world-size) starts
/// again, each `lathe-cli resume RUN`: they meet under "<run id>.resume.<the launcher's job id or
/// --rendezvous-id>" in the run's compute.rendezvous (the first meeting's keys are stale) and continue
/// from the newest valid checkpoint, which rank 0 wrote into the run folder and every rank reads:
/// on several machines that folder (output.dir) and the store must be on a file system they share.
int resume_launched(lathe::ExperimentConfig exp, bool json, const std::string& db, const ResumeTarget& target,
                    const lathe::cli::RankArgs& args, const lathe::dist::RankInfo& who) {
  if (exp.compute.rendezvous.empty() && (who.source == "slurm" || who.source == "torchrun"))
    throw lathe::ConfigError("run " + target.run_id + ": compute.rendezvous is \"\" (the run's ranks met on one " +
                             "machine), but " + who.source + " started this resume's ranks, maybe on several: " +
                             "resume it on its machine with `lathe-cli resume " + target.run_id + "` alone");
  exp.compute.rendezvous_id.clear();  // the launcher's id (or --rendezvous-id), made the resume's own below
  Ranks ranks;
  ranks.plan = lathe::cli::plan_ranks(exp, args, target.run_id);
  if (!ranks.plan.rank.note.empty())
    std::fprintf(stderr, "lathe: %s\n", ranks.plan.rank.note.c_str());
  ranks.plan.rendezvous_id = target.run_id + ".resume." + ranks.plan.rendezvous_id;
  exp.compute.rendezvous_id = ranks.plan.rendezvous_id;
  exp.train.threads = ranks.plan.threads;
  if (ranks.worker()) {
    ranks.resume_checkpoint_dir = lathe::checkpoint_dir(exp, target.run_id, target.run_dir);
    if (!std::filesystem::is_directory(ranks.resume_checkpoint_dir))
      throw lathe::DataError("run " + target.run_id + ": rank " + std::to_string(ranks.plan.rank.rank) + " of " +
                             std::to_string(ranks.plan.rank.world_size) + " cannot see the checkpoint folder " +
                             ranks.resume_checkpoint_dir +
                             ": resuming ranks on several machines needs output.dir (and checkpoint.dir) on a file "
                             "system every machine shares");
  }
  ranks.workers = std::make_unique<lathe::cli::RankWorkers>(ranks.plan, std::vector<std::string>{},
                                                            exp.compute.timeout_s, &g_stop);
  ranks.comm = lathe::cli::connect_ranks(ranks.plan, exp);
  const std::string label = "run " + target.run_id;
  if (ranks.worker())
    return run_or_resume(exp, label, json, db, nullptr, target.run_id, &ranks);
  return run_or_resume(exp, label, json, db, &target, "", &ranks);
}

/// The run `ref` names in the store `db`, its config and its folder. Rank 0 (`owner`) takes it over:
/// it checks the run may be resumed and brings back the samples a kill kept out of the store. The
/// other ranks of a launcher's resume only read (the store read-only: they never write it).
ResumeTarget find_resume_target(const std::string& ref, const std::string& db, bool owner,
                                lathe::ExperimentConfig& exp) {
  ResumeTarget target;
  lathe::Store store =
      owner ? lathe::Store::open(db)  // reaps a dead writer's `running` run first
            : lathe::Store::open(db, lathe::Store::read_only_options());
  target.run_id = store.resolve_run(ref);
  const lathe::RunRecord run = store.run(target.run_id);
  if (owner && run.status != lathe::RunStatus::interrupted && run.status != lathe::RunStatus::cancelled &&
      run.status != lathe::RunStatus::failed)
    throw lathe::DataError("run " + target.run_id + " is " + std::string(lathe::status_name(run.status)) +
                           ": only interrupted, cancelled or failed runs can be resumed");
  exp = lathe::parse_experiment(lathe::validate_config(nlohmann::json::parse(run.config_json)));
  if (const auto ws = store.summary(target.run_id, "dist/world_size"))
    target.world_size = static_cast<int>(ws->last);
  for (const lathe::EventRecord& e : store.events(target.run_id))
    if (e.kind == "started" && e.fields.contains("run_dir") && e.fields["run_dir"].is_string())
      target.run_dir = e.fields["run_dir"].get<std::string>();
  // A kill -9 before the first commit leaves no `started` event: the folder is then where the
  // config put it (as `repair` finds it).
  if (target.run_dir.empty() && std::filesystem::is_directory(std::filesystem::path(exp.output.dir) / target.run_id))
    target.run_dir = std::filesystem::absolute(std::filesystem::path(exp.output.dir) / target.run_id).string();
  if (target.run_dir.empty())
    throw lathe::DataError("run " + target.run_id + " has no run folder (no `started` event, no " + exp.output.dir +
                           "/" + target.run_id + "): nothing to resume from");
  // Samples the kill kept out of the store (its last uncommitted batch) come back from
  // metrics.jsonl first, so the resumed run's step axis has no hole.
  const std::string jsonl = target.run_dir + "/metrics.jsonl";
  if (owner && std::filesystem::exists(jsonl)) {
    lathe::RepairOptions ro;
    ro.metrics_file = jsonl;
    lathe::repair_run(store, target.run_id, ro);
  }
  return target;
}

/// The hidden rank options of `run` and `resume` (--rank/--world-size/--local-rank/--rendezvous-id):
/// rank 0 passes them to its workers; a launcher may pass them instead of its environment.
void add_rank_options(CLI::App* cmd, lathe::cli::RankArgs& args) {
  cmd->add_option("--rank", args.flags.rank, "This process's rank (data-parallel runs)")->group("");
  cmd->add_option("--world-size", args.flags.world_size, "Ranks in the run")->group("");
  cmd->add_option("--local-rank", args.flags.local_rank, "This process's rank on its machine")->group("");
  cmd->add_option("--rendezvous-id", args.rendezvous_id, "The key prefix the ranks share")->group("");
}

/// `lathe-cli resume RUN`: continues an interrupted, cancelled or failed run in the same store row
/// and folder from its newest valid checkpoint, with the config it was started with. Under a
/// launcher (srun, torchrun, --rank) every rank runs it (resume_launched); otherwise rank 0 starts a
/// data-parallel run's other ranks on this machine itself (resume_ranks).
int cmd_resume(const std::string& ref, bool json, const std::string& db, double wall_offset_ms,
               const lathe::cli::RankArgs& args) {
  const lathe::dist::RankInfo who = lathe::dist::discover_rank(args.flags);
  const bool launched = who.launched();
  lathe::ExperimentConfig exp;
  ResumeTarget target = find_resume_target(ref, db, !launched || who.rank == 0, exp);
  target.wall_offset_ms = wall_offset_ms;
  // The checkpoint's position is in steps of the run's global batch (ranks x train.batch_size): it
  // resumes on as many ranks as trained it (the engine would refuse the steps per epoch later, in
  // its own terms). A run srun's ranks trained, resumed by a lone process, say.
  const int world = launched ? who.world_size : exp.compute.devices;
  if (target.world_size > 0 && world != target.world_size)
    throw lathe::DataError("run " + target.run_id + " trained on " + std::to_string(target.world_size) +
                           " ranks (its dist/world_size) and this resume would run " + std::to_string(world) +
                           ": its checkpoints count steps of " + std::to_string(target.world_size) + " x " +
                           std::to_string(exp.train.batch_size) + " samples; resume it on " +
                           std::to_string(target.world_size) + " ranks" +
                           (launched || exp.compute.devices > 1
                                ? ""
                                : ", each started by the launcher that ran it (`srun lathe-cli resume " +
                                      target.run_id + "`)"));
  if (launched)
    return resume_launched(exp, json, db, target, args, who);
  if (exp.compute.devices == 1)
    return run_or_resume(exp, "run " + target.run_id, json, db, &target);
  return resume_ranks(exp, json, db, target);
}

}  // namespace

int main(int argc, char** argv) {
  lathe::cli::settle_openmp_wait_policy(argc, argv);  // may execute lathe-cli again, once
#ifdef LATHE_HAVE_CUDA
  lathe::cuda::register_backend();
  lathe::cuda::register_nccl_communicator();
#endif
  std::signal(SIGUSR1, on_notice_signal);  // before anything else: the supervisor may send it early
  // Ctrl-C of a report or an export removes its temporary file (run, resume and sweep then install
  // their own handlers, which stop the training cleanly).
  lathe::install_temp_file_cleanup();
  CLI::App app{"lathe-cli: run and inspect Lathe compute-optimization experiments headless"};
  app.require_subcommand(1);
  app.fallthrough();
  std::string db = lathe::Store::default_path();
  // `--db=~/x.db` (no shell expands a ~ after "="): the home folder, not a folder named "~" here.
  const CLI::Validator home_tilde(
      [](std::string& path) {
        const char* home = std::getenv("HOME");
        if (home && *home && (path == "~" || path.rfind("~/", 0) == 0))
          path = home + path.substr(1);
        return std::string();
      },
      "");
  app.add_option("--db", db, "The run store (SQLite), created by run")->capture_default_str()->transform(home_tilde);
  int exit_code = 0;

  std::string config_path;
  std::vector<std::string> sets;
  bool json = false;
  CLI::App* run = app.add_subcommand("run", "Validate an experiment config and run it");
  run->add_option("config", config_path, "Experiment JSON (see experiments/)")->required();
  run->add_option("--set", sets, "Override a config value: --set train.epochs=1 (repeatable)");
  run->add_flag("--json", json, "Print one JSON object per line on stdout instead of a progress bar");
  ChildOptions child;
  run->add_option("--run-id", child.run_id, "The run id to use (the spot supervisor's child)")->group("");
  run->add_flag("--no-supervise", child.no_supervise, "Run without the spot supervisor")->group("");
  add_rank_options(run, child.ranks);
  run->add_option("--resume-checkpoint-dir", child.resume_checkpoint_dir,
                  "A worker of a resumed data-parallel run: the run's checkpoint folder")
      ->group("");
  run->callback([&] {
    g_supervised = child.no_supervise;
    exit_code = cmd_run(config_path, sets, json, db, child);
  });

  std::string resume_ref;
  bool resume_json = false;
  CLI::App* resume = app.add_subcommand(
      "resume", "Continue an interrupted or cancelled run from its newest valid checkpoint (same store run)");
  resume->add_option("run", resume_ref, "Run id, id prefix or name")->required();
  resume->add_flag("--json", resume_json, "Print one JSON object per line on stdout instead of a progress bar");
  bool resume_no_supervise = false;  // a resume is never supervised; accepted from the supervisor
  double resume_wall_offset_ms = 0;
  resume->add_flag("--no-supervise", resume_no_supervise, "")->group("");
  resume->add_option("--wall-offset-ms", resume_wall_offset_ms, "The run clock at the start (spot supervisor)")
      ->group("");
  lathe::cli::RankArgs resume_ranks_args;  // a launcher's resume: every rank runs `resume RUN`
  add_rank_options(resume, resume_ranks_args);
  resume->callback([&] {
    g_supervised = resume_no_supervise;
    exit_code = cmd_resume(resume_ref, resume_json, db, resume_wall_offset_ms, resume_ranks_args);
  });

  CLI::App* schema =
      app.add_subcommand("schema", "Print the experiment schema (every knob, its default and range) as JSON");
  schema->callback([&] { std::cout << lathe::schema_as_json().dump(2) << "\n"; });

  std::string validate_path;
  std::vector<std::string> validate_sets;
  CLI::App* validate = app.add_subcommand("validate", "Check a config and print it with every default filled in");
  validate->add_option("config", validate_path, "Experiment JSON")->required();
  validate->add_option("--set", validate_sets, "Override a config value (repeatable)");
  validate->callback([&] {
    nlohmann::json cfg = lathe::load_config_file(validate_path);
    for (const std::string& s : validate_sets)
      lathe::apply_override(cfg, s);
    std::cout << lathe::validate_config(cfg).dump(2) << "\n";
    warn_unused_fields(cfg);
  });

  lathe::cli::add_history_commands(app, db, exit_code);
  lathe::cli::add_note_commands(app, db, exit_code);
  lathe::cli::add_importance_command(app, db, exit_code);
  lathe::cli::add_cost_commands(app, db, exit_code);
  lathe::cli::add_repair_command(app, db, exit_code);
  lathe::cli::add_devices_command(app, exit_code);
  lathe::cli::add_scaling_command(app, db, exit_code);
  lathe::cli::add_export_model_command(app, db, exit_code);
  lathe::cli::add_sweep_command(app, db, exit_code);
  lathe::cli::add_import_command(app, db, exit_code);

  // `lathe-cli lst`: name the word and the commands (CLI11 says only "A subcommand is required").
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--db") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] == '-')
      continue;
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({}))
      names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), a) != names.end())
      break;
    const std::vector<std::string> close = lathe::typo_matches(a, names, 1);
    std::string all;
    for (const std::string& n : names)
      all += (all.empty() ? "" : ", ") + n;
    std::fprintf(stderr, "lathe-cli: unknown command '%s'%s; commands: %s (lathe-cli --help says what each does)\n",
                 a.c_str(), close.empty() ? "" : (" (did you mean '" + close.front() + "'?)").c_str(), all.c_str());
    return 2;
  }
  // Subcommand callbacks run inside parse(), so user errors from them are caught here too.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const lathe::ConfigError& e) {
    std::fprintf(stderr, "lathe-cli: config error:\n%s\n", e.what());
    return 2;
  } catch (const lathe::DataError& e) {
    std::fprintf(stderr, "lathe-cli: data error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lathe-cli: error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
