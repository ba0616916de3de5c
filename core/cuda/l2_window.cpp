// ninfer::core - the decode graph's L2 prefetch window: which weight bytes to request at each launch.
#include "core/cuda/l2_window.h"

#include "core/cuda/device_weights.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace ninfer::core::cuda {

L2WindowSettings L2WindowSettings::from_env() {
    static const L2WindowSettings s = [] {
        L2WindowSettings r;
        if (const char* v = std::getenv("NINFER_L2_PREFETCH"); v && *v)
            r.mode = std::clamp(std::atoi(v), 0, 2);
        if (const char* v = std::getenv("NINFER_L2_PREFETCH_MB"); v && *v)
            r.lookahead_bytes = uint64_t(std::clamp(std::atoi(v), 1, 1024)) << 20;
        return r;
    }();
    return s;
}

void L2Window::clear() {
    parts_.clear();
    uses_.clear();
    by_key_.clear();
    pos_ = issued_ = 0;
}

void L2Window::use(const void* key, const std::vector<kernels::L2Range>& parts) {
    const uint64_t start = pos_;
    for (const kernels::L2Range& r : parts) {
        if (!r.data || r.bytes == 0)
            continue;
        parts_.push_back({pos_, r});
        pos_ += r.bytes;
    }
    uses_.push_back({start, pos_, parts_.size()});
    by_key_.emplace(key, uses_.size() - 1);
}

void L2Window::traffic(uint64_t bytes) { pos_ += bytes; }

std::vector<kernels::L2Range> L2Window::window(const void* key) {
    std::vector<kernels::L2Range> out;
    const auto it = by_key_.find(key);
    if (it == by_key_.end())
        return out;
    const Use& u = uses_[it->second];
    const uint64_t from = std::max(issued_, u.end), to = u.start + settings_.lookahead_bytes;
    for (size_t p = u.next_part; p < parts_.size() && parts_[p].at < to; ++p) {
        const Part& part = parts_[p];
        const uint64_t a = std::max(part.at, from), b = std::min(part.at + part.range.bytes, to);
        if (a < b)
            out.push_back({static_cast<const uint8_t*>(part.range.data) + (a - part.at), b - a});
    }
    issued_ = std::max(issued_, to);
    return out;
}

void L2Window::before(const void* key, cudaStream_t stream) {
    if (!enabled())
        return;
    const std::vector<kernels::L2Range> ranges = window(key);
    for (size_t i = 0; i < ranges.size(); i += kernels::kL2PrefetchMaxRanges) {
        kernels::L2PrefetchList list;
        if (settings_.mode == 1)
            for (size_t j = i; j < ranges.size() && j < i + kernels::kL2PrefetchMaxRanges; ++j)
                list.range[list.count++] = ranges[j];
        cuda_check(kernels::l2_prefetch_branch(list, stream), "L2 prefetch branch");
    }
}

} // namespace ninfer::core::cuda
