// ninfer::kernels - a kernel that faults on purpose: the test-only device fault behind
// NINFER_FAULT=engine_step:N (core/engine/fault_injection.h).
//
// Contract:
// - illegal_write(stream) launches one thread that stores to an address in the never-mapped first
//   page (a null-pointer write) and returns the launch's status. When the stream reaches it the
//   context gets cudaErrorIllegalAddress ("an illegal memory access was encountered"), a sticky
//   error: every later CUDA call of the process fails with it, as after a real device fault, and
//   the process must exit to get a working context again. Nothing else (another process, the
//   GPU's other contexts) is affected.
// Thread safety: any host thread, any stream (never one being captured into a graph).
#pragma once

#include <cuda_runtime.h>

namespace ninfer::kernels {

cudaError_t illegal_write(cudaStream_t stream);

} // namespace ninfer::kernels
