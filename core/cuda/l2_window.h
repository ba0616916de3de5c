// ninfer::core - the decode graph's L2 prefetch window: while the step's latency-bound launches
// leave DRAM idle, pull the weights that come next into L2 on branches of the captured graph
// (kernels/l2_prefetch.h), so that their GEMVs load from L2. A hint only: no result depends on it.
//
// Contract:
// - L2WindowSettings::from_env(): NINFER_L2_PREFETCH = 0 (off, the default), 1 (on), 2 (the same
//   branches with nothing to prefetch: the cost of the branches alone); NINFER_L2_PREFETCH_MB =
//   the lookahead D in MiB (default 32, 1..1024). Read once per process.
// - The runner describes one step's memory traffic in enqueue order: use(key, parts) for a launch
//   that reads the static ranges `parts` (weights; key identifies the launch, e.g. its first
//   matrix), traffic(bytes) for what streams through L2 but cannot be prefetched (KV, GDN state,
//   routed experts). Positions are cumulative bytes of that traffic.
// - before(key, stream), called just before the launch `key` is enqueued: with the launch at
//   positions [start, end), it prefetches every static byte of the LATER uses that lies in
//   [max(issued, end), start + D) and sets issued to start + D. So a byte is requested at most once
//   per step, never more than D bytes of traffic ahead of the launch that reads it (older lines
//   would be evicted before use: the L2 holds 50 MB), and never for the launch already running
//   (a matrix larger than D is not prefetched at all; only the next one's head). Each call
//   enqueues at most one branch per kL2PrefetchMaxRanges ranges; a key not described is ignored.
// - begin() resets issued; the runner calls it at the start of each step's enqueue and only
//   describes the step when it is being captured (kernels::l2_prefetch_branch does nothing
//   otherwise).
// Thread safety: engine thread only (the runner's).
#pragma once

#include "ninfer/kernels/l2_prefetch.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ninfer::core::cuda {

struct L2WindowSettings {
    int mode = 0;                         // 0 off, 1 prefetch, 2 empty branches only
    uint64_t lookahead_bytes = 32ull << 20;
    static L2WindowSettings from_env();
};

class L2Window {
  public:
    explicit L2Window(L2WindowSettings s = {}) : settings_(s) {}
    bool enabled() const { return settings_.mode != 0; }
    const L2WindowSettings& settings() const { return settings_; }

    void clear();
    void use(const void* key, const std::vector<kernels::L2Range>& parts);
    void traffic(uint64_t bytes);
    void begin() { issued_ = 0; }
    void before(const void* key, cudaStream_t stream);
    // The ranges before(key) would prefetch now (advances issued like before; for tests and the
    // branch itself).
    std::vector<kernels::L2Range> window(const void* key);

  private:
    struct Part {
        uint64_t at; // traffic position of the part's first byte
        kernels::L2Range range;
    };
    struct Use {
        uint64_t start, end;
        size_t next_part; // index in parts_ of the first part of the later uses
    };
    L2WindowSettings settings_;
    std::vector<Part> parts_;
    std::vector<Use> uses_;
    std::unordered_map<const void*, size_t> by_key_;
    uint64_t pos_ = 0, issued_ = 0;
};

} // namespace ninfer::core::cuda
