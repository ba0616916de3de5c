// ninfer::core - the engine's lane-state operations as typed values: what they need at start
// (LaneStateOptions) and what each one reports (Engine::save_lane, restore_lane, erase_lane,
// evict, list_cache, persist_all, restore_all in engine.h).
//
// Contract:
// - LaneStateOptions is read once, when the Engine is built: host_cache_bytes > 0 builds the
//   prefix cache (its snapshot store page-locked in host memory; no disk tier), identity is what
//   slot files are stamped with and checked against, slots_dir holds `ninferctl slot save NAME`
//   files (NAME.nslot), lanes_dir holds --persist-slots files (lane-N.nslot). Both directories are
//   created 0750 on the first save; unfinished temps of a crash are removed on the I/O thread
//   when the engine is built (slots_dir) and before restore_all (lanes_dir).
// - Every result carries `error` (a kind and a one-line message) when the operation failed, and
//   its figures otherwise. A failed operation leaves the lane as it was.
// - note / warn receive one-line log messages ("slots, ...") from the engine and I/O threads;
//   they must be thread-safe and must not block.
// Thread safety: plain data.
#pragma once

#include "core/engine/snapshot_store.h"
#include "core/engine/slot_file.h"
#include "core/util/error.h"
#include "core/util/file_io.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ninfer::core {

struct LaneStateOptions {
    uint64_t host_cache_bytes = 0; // host-cache-mib; 0 = no prefix cache
    SlotIdentity identity;
    std::string slots_dir;         // <state-dir>/slots
    std::string lanes_dir;         // <state-dir>/lanes
    std::function<void(const std::string&)> note, warn;
};

// save_lane / restore_lane / erase_lane.
struct LaneOpResult {
    std::optional<ErrorInfo> error;
    int lane = 0;
    uint64_t n_tokens = 0;
    uint64_t bytes = 0;       // the slot file's size (0 for erase)
    double elapsed_ms = 0;    // from the call to the result, queueing included
    FileIoMode mode = FileIoMode::Plain;
};

struct CacheEvictRequest {
    enum class Mode : uint8_t { All, OlderThan, Key };
    Mode mode = Mode::All;
    double older_than_s = 0; // OlderThan: idle for longer than this
    std::string key;         // Key: 16 hex digits (prefix_key_hex); absent -> NotFound
};

struct CacheEvictResult {
    std::optional<ErrorInfo> error;
    uint64_t count = 0, bytes = 0;
};

struct CacheListing {
    std::optional<ErrorInfo> error;
    std::vector<SnapshotInfo> entries; // SnapshotInfo::id is the entry's key (prefix_key_hex)
    uint64_t budget_bytes = 0, used_bytes = 0; // 0 and 0 without a prefix cache
};

// persist_all / restore_all: one pass over every lane.
struct LanesSummary {
    int n_done = 0, n_failed = 0;
    uint64_t bytes = 0;
    double elapsed_ms = 0;
    // "slots, saved 2 lane(s), 1234 bytes in 5 ms[, 1 failed]" with verb "saved" or "restored".
    std::string describe(const std::string& verb) const;
};

} // namespace ninfer::core
