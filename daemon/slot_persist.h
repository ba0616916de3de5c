// ninfer::daemon - --persist-slots: every lane's sequence is saved when the daemon stops (and when
// `ninferctl drain` has let the running requests finish) and loaded back when it starts, so a
// restart does not lose a conversation's context.
//
// Contract:
// - Files: <state-dir>/lanes/lane-N.nslot in the slot file format (core/engine/slot_file.h), a
//   directory of their own so names an operator saved under slots/ are never overwritten.
//   Directories are created 0750; unfinished temps of a crash are removed at restore.
// - persist_lanes() handles lanes 0..n_lanes-1 one after another (only one lane image in memory
//   at a time): the engine thread copies the lane at a step boundary (Scheduler::slot_save), the
//   I/O worker writes it crash-safe; the file of a lane that holds nothing is removed, so a start
//   never brings back a sequence the lane no longer had. restore_lanes() reads each lane-N.nslot
//   (N < n_lanes) on the I/O worker and loads it into lane N on the engine thread. A file that is
//   refused (another model or KV dtype, corrupted, truncated) or a lane that cannot take it is
//   logged as a warning and skipped: the lane stays empty and usable.
// - Both report through done(summary) on the loop thread (LanePersistence::post) after the last
//   lane, whatever failed. They never throw.
// Thread affinity: call from the loop thread; the work runs on the engine and I/O threads.
#pragma once

#include "core/engine/engine.h"
#include "core/engine/io_worker.h"
#include "core/engine/slot_file.h"

#include <functional>
#include <string>

namespace ninfer::daemon {

struct LanePersistence {
    core::Engine* engine = nullptr;
    core::IoWorker* io = nullptr;
    core::SlotIdentity identity;
    std::string dir; // <state-dir>/lanes
    int n_lanes = 0;
    std::function<void(std::function<void()>)> post; // runs a closure on the loop thread
};

std::string lane_file_path(const std::string& dir, int lane);
void persist_lanes(const LanePersistence& target, std::function<void(const std::string& summary)> done);
void restore_lanes(const LanePersistence& target, std::function<void(const std::string& summary)> done);

} // namespace ninfer::daemon
