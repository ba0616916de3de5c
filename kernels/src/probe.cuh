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
__device__ __forceinline__ void probe_wait_end(unsigned long long t_wait) {
    if (!g_probe_state.on || !probe_thread()) return;
    const uint32_t i = atomicAdd(g_probe_state.count, 1u);
    if (i >= g_probe_state.capacity) return;
    ProbeEvent e;
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(e.grid));
    asm volatile("mov.u32 %0, %%smid;" : "=r"(e.smid));
    e.t_start = probe_start_slot(); // a kernel that waits without calling launch_dependents first: 0 or stale
    e.t_wait = t_wait;
    e.t_go = probe_now();
    e.block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    e.n_blocks = gridDim.x * gridDim.y * gridDim.z;
    e.threads = blockDim.x * blockDim.y * blockDim.z;
    g_probe_state.events[i] = e;
}
#else
__device__ __forceinline__ void probe_block_start() {}
__device__ __forceinline__ unsigned long long probe_wait_begin() { return 0; }
__device__ __forceinline__ void probe_wait_end(unsigned long long) {}
#endif

} // namespace ninfer::kernels
