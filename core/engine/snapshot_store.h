// ninfer::core - the checkpoint store behind the prefix cache: lane images in host memory sized by
// host-cache-mib (page-locked), evicted by rebuild value per byte.
//
// Contract (engine thread only):
// - put(id, image, now) stores a checkpoint under a caller-chosen id. The store never holds more
//   than its budget: before storing, the lowest-valued entries are dropped. A checkpoint bigger
//   than the budget is not stored (put returns false). Dropped ids are reported through
//   take_dropped() so the index above can forget them.
// - Eviction value (higher = kept longer), written out so tests can fix the order:
//       rebuild_ms = 1000 * n_tokens / rebuild_tokens_per_s      (prefill time to recompute it)
//       value      = rebuild_ms / (bytes / 1 MiB) / (1 + idle_s / kIdleHalfLifeS)
//   i.e. compute saved per MiB held, halved after kIdleHalfLifeS seconds without use. Ties: the
//   least recently used goes first, then the lower id.
// - get(id, now) returns the image and marks it used; nullptr if absent. erase removes one entry.
// - Host buffers (every section of an image) are mlock()ed; when locking is refused
//   (RLIMIT_MEMLOCK) the store warns once through Options::warn and continues unlocked.
// - There is no disk tier: an evicted checkpoint is gone (it is rebuilt by prefill when needed).
//   Lanes reach disk only as slot files (`ninferctl slot save`, --persist-slots). The device tier
//   belongs to GPU backends (a lane's state stays in its lane until reused).
#pragma once

#include "core/backend/lane_image.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ninfer::core {

inline constexpr double kIdleHalfLifeS = 600.0;

struct SnapshotStoreOptions {
    uint64_t host_budget_bytes = 4096ull << 20; // host-cache-mib
    bool lock_memory = true;
    std::function<void(const std::string&)> warn;
};

struct SnapshotInfo {
    uint64_t id = 0;
    uint64_t n_tokens = 0;
    uint64_t bytes = 0;
    std::chrono::steady_clock::time_point created, last_used;
    uint64_t hits = 0;
};

class SnapshotStore {
  public:
    using Clock = std::chrono::steady_clock;
    explicit SnapshotStore(SnapshotStoreOptions options);
    ~SnapshotStore();
    SnapshotStore(const SnapshotStore&) = delete;
    SnapshotStore& operator=(const SnapshotStore&) = delete;

    bool put(uint64_t id, LaneImage image, Clock::time_point now);
    const LaneImage* get(uint64_t id, Clock::time_point now);
    bool contains(uint64_t id) const { return entries_.count(id) != 0; }
    const SnapshotInfo* info(uint64_t id) const; // nullptr if absent
    bool erase(uint64_t id);
    std::vector<uint64_t> take_dropped(); // ids evicted by budget since the last call

    // Eviction value of an entry at `now` (the formula above).
    double value(const SnapshotInfo& info, Clock::time_point now) const;
    void set_rebuild_tokens_per_s(double rate) { rebuild_tokens_per_s_ = rate > 0 ? rate : rebuild_tokens_per_s_; }

    std::vector<SnapshotInfo> list() const;
    uint64_t used_bytes() const { return used_; }
    size_t n_entries() const { return entries_.size(); }
    uint64_t budget_bytes() const { return options_.host_budget_bytes; }
    bool memory_locked() const { return lock_ok_; }

    static uint64_t image_bytes(const LaneImage& image);

  private:
    struct Entry {
        SnapshotInfo info;
        std::unique_ptr<LaneImage> image;
        bool locked = false;
    };
    bool make_room(uint64_t bytes, Clock::time_point now, uint64_t keep_id);
    void drop(uint64_t id);
    void lock(Entry& e);
    void unlock(Entry& e);

    SnapshotStoreOptions options_;
    std::map<uint64_t, Entry> entries_;
    uint64_t used_ = 0;
    double rebuild_tokens_per_s_ = 1000.0;
    bool lock_ok_ = true, warned_ = false;
    std::vector<uint64_t> dropped_;
};

} // namespace ninfer::core
