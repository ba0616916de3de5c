// ninfer::kernels - host side of the step timeline probe (ninfer/kernels/probe.h).
#include "common.cuh"
#include "ninfer/kernels/probe.h"

#include <cstdio>
#include <mutex>
#include <vector>

namespace ninfer::kernels {

#if NINFER_PROBE
namespace {
constexpr uint32_t kProbeCapacity = 1u << 20;
struct ProbeHost {
    std::mutex mu;
    std::vector<ProbeSetter> setters; // one per translation unit with kernels
    ProbeEvent* events = nullptr;
    uint32_t* count = nullptr;
};
ProbeHost& probe_host() {
    static ProbeHost h; // function-local: the units' static registrations may run before any other static
    return h;
}
} // namespace

void probe_register(ProbeSetter set) {
    ProbeHost& h = probe_host();
    const std::lock_guard<std::mutex> lock(h.mu);
    h.setters.push_back(set);
}

bool probe_built() { return true; }

void probe_arm(bool on) {
    ProbeHost& h = probe_host();
    const std::lock_guard<std::mutex> lock(h.mu);
    if (!h.events && (cudaMalloc(&h.events, sizeof(ProbeEvent) * kProbeCapacity) != cudaSuccess ||
                      cudaMalloc(&h.count, sizeof(uint32_t)) != cudaSuccess))
        return;
    cudaDeviceSynchronize();
    if (on) cudaMemset(h.count, 0, sizeof(uint32_t));
    const ProbeState s{h.events, h.count, kProbeCapacity, on ? 1 : 0};
    for (ProbeSetter set : h.setters) set(s);
    cudaDeviceSynchronize();
}

int64_t probe_dump(const char* path) {
    ProbeHost& h = probe_host();
    const std::lock_guard<std::mutex> lock(h.mu);
    uint32_t n = 0;
    if (h.count) cudaMemcpy(&n, h.count, sizeof n, cudaMemcpyDeviceToHost);
    const uint32_t rows = n < kProbeCapacity ? n : kProbeCapacity;
    std::vector<ProbeEvent> v(rows);
    if (rows) cudaMemcpy(v.data(), h.events, sizeof(ProbeEvent) * rows, cudaMemcpyDeviceToHost);
    FILE* f = std::fopen(path, "w");
    if (!f) return -1;
    std::fprintf(f, "grid,block,nblocks,threads,smid,t_start,t_wait,t_go\n");
    for (const ProbeEvent& e : v)
        std::fprintf(f, "%llu,%u,%u,%u,%u,%llu,%llu,%llu\n", e.grid, e.block, e.n_blocks, e.threads, e.smid, e.t_start,
                     e.t_wait, e.t_go);
    return std::fclose(f) == 0 ? int64_t(n) : -1;
}
#else
bool probe_built() { return false; }
void probe_arm(bool) {}
int64_t probe_dump(const char*) { return 0; }
#endif

} // namespace ninfer::kernels
