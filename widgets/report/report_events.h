// One line of plain text per stored event, for the report's event table: what a reader wants to
// know of each kind the trainer and the store write (started, epoch, artifact, finished, failed,
// status, note), the raw fields for any other kind.
#pragma once

#include <string>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe::report {

std::string describe_event(const EventRecord& event);
/// One line for consecutive checkpoint events: how many, their steps and triggers, the write times.
std::string describe_checkpoints(const std::vector<const EventRecord*>& checkpoints);

/// The events of one interruption (a spot notice or an interrupted run up to its resume and the
/// phase it continues) as one line: the notice's step, the emergency checkpoint and its write
/// time, how the process ended (after how long), and the step the run resumed from.
std::string describe_interruption(const std::vector<const EventRecord*>& events);

/// An event that opens an interruption: a spot notice, the trainer's `interrupted`, or a status
/// change to interrupted (a killed writer reaped).
bool opens_interruption(const EventRecord& e);
/// A failure or an error message (shown highlighted).
bool is_error_event(const EventRecord& event);
/// The error text of a failed run ("" when none).
std::string run_error(const std::vector<EventRecord>& events);

}  // namespace lathe::report
