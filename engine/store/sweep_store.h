// Sweeps in the store (schema v6: sweeps, sweep_members): a sweep's definition, its planned
// members and which run each became, so progress (n of total) is one query and a killed sweep can
// be resumed (members whose run did not finish run again). A member's state follows its run: the
// runs table is the truth, sweep_progress() reads it.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace lathe {

class Store;

/// pending: not started; running: its run is in progress; the rest: how its run ended.
enum class MemberState { pending, running, finished, failed, cancelled };
std::string_view member_state_name(MemberState s);

struct SweepMemberRecord {
  int index = 0;
  std::string name;
  std::string config_json;
  std::string run_id;  ///< "" until started
  MemberState state = MemberState::pending;
};

struct SweepRecord {
  std::string id;
  std::string name;
  std::string definition_json;
  int64_t created_ms = 0;
  std::string status;     ///< pending, running, finished, failed, cancelled, submitted (Slurm)
  std::string slurm_job;  ///< the Slurm job id of a submitted sweep, else ""
  std::string folder;     ///< the shared folder of a Slurm sweep, else ""
  int total = 0;
  int finished = 0;  ///< members whose run finished
  int failed = 0;    ///< members whose run failed, was cancelled or interrupted
  int running = 0;
};

/// What a sweep is now: "finished" when every member finished, "running" while one runs, else
/// its stored status (pending, failed, cancelled, submitted).
std::string sweep_state(const SweepRecord& sweep);

/// A new sweep with its members, all pending, in one transaction. Its id looks like a run id
/// (make_run_id(): the local time to the second and 24 random bits) and is unique in the store:
/// an id a sweep already has is drawn again (`draw_id`, make_run_id by default; a test passes one
/// that repeats itself), so two sweeps made in the same second never share one. Error naming the
/// store when 100 draws all clash.
struct NewSweepMember {
  std::string name;
  nlohmann::json config;
};
std::string create_sweep(Store& store, const std::string& name, const nlohmann::json& definition,
                         const std::vector<NewSweepMember>& members,
                         const std::function<std::string()>& draw_id = {});

/// Every sweep, newest first, with its progress (members' states refreshed from their runs).
std::vector<SweepRecord> list_sweeps(const Store& store);
/// An exact sweep id, a unique prefix or a sweep name -> the record. DataError naming the
/// candidates when none or several match.
SweepRecord find_sweep(const Store& store, const std::string& ref);
/// The members in index order; a started member's state is its run's (finished, failed,
/// cancelled / interrupted -> cancelled, running / queued -> running; a run that is gone -> pending).
std::vector<SweepMemberRecord> sweep_members(const Store& store, const std::string& sweep_id);
/// The run ids of the sweep's started members (the run browser's filter).
std::vector<std::string> sweep_run_ids(const Store& store, const std::string& sweep_id);

/// A run id no run of the store has (make_run_id() drawn again on a clash).
std::string new_run_id(const Store& store);

/// Records that member `index` now is run `run_id` in `state`.
void set_sweep_member(Store& store, const std::string& sweep_id, int index, const std::string& run_id,
                      MemberState state);
void set_sweep_status(Store& store, const std::string& sweep_id, const std::string& status);
/// A Slurm sweep: its job id and shared folder (status becomes `submitted`).
void set_sweep_slurm(Store& store, const std::string& sweep_id, const std::string& job_id, const std::string& folder);

}  // namespace lathe
