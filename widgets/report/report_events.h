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
/// A failure or an error message (shown highlighted).
bool is_error_event(const EventRecord& event);
/// The error text of a failed run ("" when none).
std::string run_error(const std::vector<EventRecord>& events);

}  // namespace lathe::report
