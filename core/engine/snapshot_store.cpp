// ninfer::core - snapshot store: page-locked host memory, evicted by rebuild value per byte.
#include "core/engine/snapshot_store.h"

#include <cerrno>
#include <cstring>
#include <sys/mman.h>

namespace ninfer::core {

SnapshotStore::SnapshotStore(SnapshotStoreOptions options) : options_(std::move(options)) {}

SnapshotStore::~SnapshotStore() {
    for (auto& [id, e] : entries_) unlock(e);
}

uint64_t SnapshotStore::image_bytes(const LaneImage& image) { return image.n_bytes(); }

double SnapshotStore::value(const SnapshotInfo& info, Clock::time_point now) const {
    double rebuild_ms = 1000.0 * double(info.n_tokens) / rebuild_tokens_per_s_;
    double mib = double(info.bytes) / double(1 << 20);
    double idle_s = std::chrono::duration<double>(now - info.last_used).count();
    if (idle_s < 0) idle_s = 0;
    return rebuild_ms / mib / (1.0 + idle_s / kIdleHalfLifeS);
}

void SnapshotStore::lock(Entry& e) {
    if (!options_.lock_memory || !lock_ok_) return;
    std::vector<LaneSection>& sections = e.image->sections;
    size_t n_locked = 0;
    int err = 0;
    for (; n_locked < sections.size(); ++n_locked) {
        SectionBytes& b = sections[n_locked].bytes;
        if (!b.empty() && ::mlock(b.data(), b.size()) != 0) {
            err = errno;
            break;
        }
    }
    if (n_locked == sections.size()) {
        e.locked = true;
        return;
    }
    for (size_t i = 0; i < n_locked; ++i)
        if (!sections[i].bytes.empty()) ::munlock(sections[i].bytes.data(), sections[i].bytes.size());
    lock_ok_ = false;
    if (!warned_ && options_.warn)
        options_.warn(std::string("snapshot store: cannot page-lock the host cache (") + std::strerror(err) +
                      "); continuing unlocked (raise LimitMEMLOCK to lock it)");
    warned_ = true;
}

void SnapshotStore::unlock(Entry& e) {
    if (!e.locked || !e.image) return;
    for (LaneSection& s : e.image->sections)
        if (!s.bytes.empty()) ::munlock(s.bytes.data(), s.bytes.size());
    e.locked = false;
}

void SnapshotStore::drop(uint64_t id) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    unlock(it->second);
    used_ -= it->second.info.bytes;
    entries_.erase(it);
}

bool SnapshotStore::make_room(uint64_t bytes, Clock::time_point now, uint64_t keep_id) {
    if (bytes > options_.host_budget_bytes) return false;
    while (used_ + bytes > options_.host_budget_bytes) {
        Entry* victim = nullptr;
        double victim_value = 0;
        for (auto& [id, e] : entries_) {
            if (id == keep_id) continue;
            double v = value(e.info, now);
            if (!victim || v < victim_value ||
                (v == victim_value && e.info.last_used < victim->info.last_used)) {
                victim = &e;
                victim_value = v;
            }
        }
        if (!victim) return false;
        uint64_t id = victim->info.id;
        drop(id);
        dropped_.push_back(id);
    }
    return true;
}

bool SnapshotStore::put(uint64_t id, LaneImage image, Clock::time_point now) {
    erase(id);
    uint64_t bytes = image_bytes(image);
    if (bytes == 0 || !make_room(bytes, now, id)) return false;
    Entry e;
    e.info.id = id;
    e.info.n_tokens = image.tokens.size();
    e.info.bytes = bytes;
    e.info.created = e.info.last_used = now;
    e.image = std::make_unique<LaneImage>(std::move(image));
    auto [it, inserted] = entries_.emplace(id, std::move(e));
    lock(it->second);
    used_ += bytes;
    return true;
}

const LaneImage* SnapshotStore::get(uint64_t id, Clock::time_point now) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return nullptr;
    Entry& e = it->second;
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
