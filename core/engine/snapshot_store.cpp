// ninfer::core - snapshot store: host tier (mlocked) and disk tier, evicted by rebuild value per byte.
#include "core/engine/snapshot_store.h"

#include "core/util/error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace ninfer::core {

SnapshotStore::SnapshotStore(SnapshotStoreOptions options) : options_(std::move(options)) {
    if (options_.disk_budget_bytes > 0) {
        if (options_.disk_dir.empty()) throw Error("snapshot store: a disk budget needs a directory");
        make_directories(options_.disk_dir, 0750);
        remove_stale_temps(options_.disk_dir, ".nsnap");
    }
}

SnapshotStore::~SnapshotStore() {
    for (auto& [id, e] : entries_) {
        if (e.info.tier == SnapshotTier::Host) unlock(e);
        else ::unlink(disk_path(id).c_str());
    }
}

uint64_t SnapshotStore::image_bytes(const LaneImage& image) {
    return image.tokens.size() * sizeof(int32_t) + image.kv.size() + image.gdn.size();
}

double SnapshotStore::value(const SnapshotInfo& info, Clock::time_point now) const {
    double rebuild_ms = 1000.0 * double(info.n_tokens) / rebuild_tokens_per_s_;
    double mib = double(info.bytes) / double(1 << 20);
    double idle_s = std::chrono::duration<double>(now - info.last_used).count();
    if (idle_s < 0) idle_s = 0;
    return rebuild_ms / mib / (1.0 + idle_s / kIdleHalfLifeS);
}

std::string SnapshotStore::disk_path(uint64_t id) const {
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.nsnap", static_cast<unsigned long long>(id));
    return options_.disk_dir + "/" + name;
}

void SnapshotStore::lock(Entry& e) {
    if (!options_.lock_memory || !lock_ok_) return;
    LaneImage& img = *e.image;
    bool ok = (img.kv.empty() || ::mlock(img.kv.data(), img.kv.size()) == 0) &&
              (img.gdn.empty() || ::mlock(img.gdn.data(), img.gdn.size()) == 0);
    if (ok) {
        e.locked = true;
        return;
    }
    int err = errno;
    if (!img.kv.empty()) ::munlock(img.kv.data(), img.kv.size());
    lock_ok_ = false;
    if (!warned_ && options_.warn)
        options_.warn(std::string("snapshot store: cannot page-lock the host cache (") + std::strerror(err) +
                      "); continuing unlocked (raise LimitMEMLOCK to lock it)");
    warned_ = true;
}

void SnapshotStore::unlock(Entry& e) {
    if (!e.locked || !e.image) return;
    if (!e.image->kv.empty()) ::munlock(e.image->kv.data(), e.image->kv.size());
    if (!e.image->gdn.empty()) ::munlock(e.image->gdn.data(), e.image->gdn.size());
    e.locked = false;
}

void SnapshotStore::drop(uint64_t id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& e = it->second;
    if (e.info.tier == SnapshotTier::Host) {
        unlock(e);
        host_used_ -= e.info.bytes;
    } else {
        ::unlink(disk_path(id).c_str());
        disk_used_ -= e.info.bytes;
    }
    entries_.erase(it);
}

void SnapshotStore::demote(Entry& e, Clock::time_point now) {
    uint64_t id = e.info.id;
    bool to_disk = options_.disk_budget_bytes >= e.info.bytes && make_room(SnapshotTier::Disk, e.info.bytes, now, id);
    if (to_disk) {
        try {
            slot_file_write(disk_path(id), options_.identity, *e.image, file_io_mode_default());
        } catch (const Error& err) {
            if (options_.warn) options_.warn(std::string("snapshot store: spill failed: ") + err.what());
            to_disk = false;
        }
    }
    if (!to_disk) {
        drop(id);
        dropped_.push_back(id);
        return;
    }
    unlock(e);
    e.image.reset();
    host_used_ -= e.info.bytes;
    disk_used_ += e.info.bytes;
    e.info.tier = SnapshotTier::Disk;
}

bool SnapshotStore::make_room(SnapshotTier tier, uint64_t bytes, Clock::time_point now, uint64_t keep_id) {
    uint64_t budget = budget_bytes(tier);
    if (bytes > budget) return false;
    while (used_bytes(tier) + bytes > budget) {
        Entry* victim = nullptr;
        double victim_value = 0;
        for (auto& [id, e] : entries_) {
            if (e.info.tier != tier || id == keep_id) continue;
            double v = value(e.info, now);
            if (!victim || v < victim_value ||
                (v == victim_value && e.info.last_used < victim->info.last_used)) {
                victim = &e;
                victim_value = v;
            }
        }
        if (!victim) return false;
        if (tier == SnapshotTier::Host) {
            demote(*victim, now);
        } else {
            uint64_t id = victim->info.id;
            drop(id);
            dropped_.push_back(id);
        }
    }
    return true;
}

bool SnapshotStore::put(uint64_t id, LaneImage image, Clock::time_point now) {
    erase(id);
    uint64_t bytes = image_bytes(image);
    if (bytes == 0 || !make_room(SnapshotTier::Host, bytes, now, id)) return false;
    Entry e;
    e.info.id = id;
    e.info.n_tokens = image.tokens.size();
    e.info.bytes = bytes;
    e.info.created = e.info.last_used = now;
    e.image = std::make_unique<LaneImage>(std::move(image));
    auto [it, inserted] = entries_.emplace(id, std::move(e));
    lock(it->second);
    host_used_ += bytes;
    return true;
}

const LaneImage* SnapshotStore::get(uint64_t id, Clock::time_point now) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return nullptr;
    Entry& e = it->second;
    if (e.info.tier == SnapshotTier::Disk) {
        LaneImage image;
        try {
            image = slot_file_read(disk_path(id), options_.identity, file_io_mode_default());
        } catch (const Error& err) {
            if (options_.warn) options_.warn(std::string("snapshot store: ") + err.what());
            drop(id);
            dropped_.push_back(id);
            return nullptr;
        }
        // Leave the disk tier first, so making room there for demoted entries cannot pick this one.
        ::unlink(disk_path(id).c_str());
        disk_used_ -= e.info.bytes;
        e.info.tier = SnapshotTier::Host;
        e.image = std::make_unique<LaneImage>(std::move(image));
        bool fits = make_room(SnapshotTier::Host, e.info.bytes, now, id);
        host_used_ += e.info.bytes;
        if (!fits) {
            drop(id);
            dropped_.push_back(id);
            return nullptr;
        }
        lock(e);
    }
    e.info.last_used = now;
    ++e.info.hits;
    return e.image.get();
}

bool SnapshotStore::erase(uint64_t id) {
    if (!entries_.count(id)) return false;
    drop(id);
    return true;
}

std::vector<uint64_t> SnapshotStore::take_dropped() {
    std::vector<uint64_t> out;
    out.swap(dropped_);
    return out;
}

const SnapshotInfo* SnapshotStore::info(uint64_t id) const {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second.info;
}

std::vector<SnapshotInfo> SnapshotStore::list() const {
    std::vector<SnapshotInfo> out;
    for (const auto& [id, e] : entries_) out.push_back(e.info);
    return out;
}

} // namespace ninfer::core
