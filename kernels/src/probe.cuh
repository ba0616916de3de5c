// ninfer::kernels - device side of the step timeline probe (ninfer/kernels/probe.h). Compiled in
// only with NINFER_PROBE (cmake -DNINFER_GPU_PROBE=ON); otherwise every hook is an empty inline.
//
// Each translation unit has its own copy of the probe state (a __device__ variable in an anonymous
// namespace: the kernels are built without relocatable device code), so each registers a setter
// that probe_arm() calls for all of them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::kernels {

#if NINFER_PROBE
struct ProbeEvent {
    unsigned long long grid, t_start, t_wait, t_go;
    uint32_t block, n_blocks, smid, threads;
};
struct ProbeState {
    ProbeEvent* events;
    uint32_t* count;
    uint32_t capacity;
    int on;
};
using ProbeSetter = void (*)(const ProbeState&);
void probe_register(ProbeSetter set); // probe.cu

namespace {
__device__ ProbeState g_probe_state;
struct ProbeRegistration {
    ProbeRegistration() {
        probe_register([](const ProbeState& s) { cudaMemcpyToSymbol(g_probe_state, &s, sizeof s); });
    }
};
const ProbeRegistration probe_registration;
} // namespace

__device__ __forceinline__ unsigned long long probe_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned long long& probe_start_slot() {
    __shared__ unsigned long long t_start;
    return t_start;
}
__device__ __forceinline__ bool probe_thread() { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }
__device__ __forceinline__ void probe_block_start() {
    if (probe_thread()) probe_start_slot() = probe_now();
}
__device__ __forceinline__ unsigned long long probe_wait_begin() { return probe_now(); }
// An event of this block (grid, SM, block, grid size, `threads`); the caller sets its times.
__device__ __forceinline__ ProbeEvent probe_event_here(uint32_t threads) {
    ProbeEvent e;
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(e.grid));
    asm volatile("mov.u32 %0, %%smid;" : "=r"(e.smid));
    e.block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    e.n_blocks = gridDim.x * gridDim.y * gridDim.z;
    e.threads = threads;
    return e;
}
__device__ __forceinline__ void probe_wait_end(unsigned long long t_wait) {
    if (!g_probe_state.on || !probe_thread()) return;
    const uint32_t i = atomicAdd(g_probe_state.count, 1u);
    if (i >= g_probe_state.capacity) return;
    ProbeEvent e = probe_event_here(blockDim.x * blockDim.y * blockDim.z);
    e.t_start = probe_start_slot(); // a kernel that waits without calling launch_dependents first: 0 or stale
    e.t_wait = t_wait;
    e.t_go = probe_now();
    g_probe_state.events[i] = e;
}
// Marks inside a kernel, for a scratch probe build that places them (none are placed in the repo):
// thread 0 of a block keeps up to kProbeMarks stamps in shared memory and writes them as events at
// the block's end, so a mark costs a clock read and a shared store on the way, not an atomic.
// A mark event has threads = 0, t_wait = its tag (base + k), t_go = its stamp, t_start = 0;
// tests/gpu/probe_report.py gives each (launch shape, tag) its times after the launch's first wait
// return. probe_mark(k, dep) stamps once `dep` has arrived: the and-with-zero must wait for it, and
// the clock is read after that.
constexpr int kProbeMarks = 32;
__device__ __forceinline__ unsigned long long* probe_mark_slots() {
    __shared__ unsigned long long slots[kProbeMarks];
    return slots;
}
__device__ __forceinline__ void probe_marks_clear() {
    if (probe_thread())
        for (int k = 0; k < kProbeMarks; ++k) probe_mark_slots()[k] = 0;
}
__device__ __forceinline__ void probe_mark(int k, uint32_t dep) {
    if (!probe_thread() || k < 0 || k >= kProbeMarks) return;
    uint32_t zero;
    asm volatile("and.b32 %0, %1, 0;" : "=r"(zero) : "r"(dep));
    probe_mark_slots()[k] = probe_now() + zero;
}
__device__ __forceinline__ void probe_marks_emit(uint32_t base) {
    if (!g_probe_state.on || !probe_thread()) return;
    for (int k = 0; k < kProbeMarks; ++k) {
        const unsigned long long t = probe_mark_slots()[k];
        if (t == 0) continue;
        const uint32_t i = atomicAdd(g_probe_state.count, 1u);
        if (i >= g_probe_state.capacity) return;
        ProbeEvent e = probe_event_here(0);
        e.t_start = 0;
        e.t_wait = base + uint32_t(k);
        e.t_go = t;
        g_probe_state.events[i] = e;
    }
}
#else
__device__ __forceinline__ void probe_marks_clear() {}
__device__ __forceinline__ void probe_mark(int, uint32_t) {}
__device__ __forceinline__ void probe_marks_emit(uint32_t) {}
__device__ __forceinline__ void probe_block_start() {}
__device__ __forceinline__ unsigned long long probe_wait_begin() { return 0; }
__device__ __forceinline__ void probe_wait_end(unsigned long long) {}
#endif

} // namespace ninfer::kernels
