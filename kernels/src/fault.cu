// ninfer::kernels - the faulting kernel of the test-only device fault (fault.h).
#include "ninfer/kernels/fault.h"

#include <cstdint>

namespace ninfer::kernels {

namespace {

__global__ void illegal_write_kernel(volatile int* address) { *address = 1; }

} // namespace

cudaError_t illegal_write(cudaStream_t stream) {
    illegal_write_kernel<<<1, 1, 0, stream>>>(reinterpret_cast<volatile int*>(uintptr_t(16)));
    return cudaGetLastError();
}

} // namespace ninfer::kernels
