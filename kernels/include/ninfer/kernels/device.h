// ninfer::kernels - is a usable CUDA device present, and if not, why (one line for the user).
//
// Contract:
// - cuda_probe() never aborts and never needs the NVIDIA driver to be installed: the runtime is
//   linked statically and loads the driver itself, so a machine without a driver gets an answer
//   ("no NVIDIA driver found (libcuda.so.1 not loadable)") instead of a failure to start.
// - ok is true only when device 0 exists and its compute capability equals the one this build was
//   compiled for (NINFER_CUDA_ARCH, e.g. 90a needs 9.0); reason then names the device.
// - sm_count() is device 0's multiprocessor count (cached after the first call; 0 without device).
// Thread safety: any thread; results are cached after the first call.
#pragma once

#include <string>

namespace ninfer::kernels {

struct CudaProbe {
    bool ok = false;
    std::string reason; // "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB" or why cuda is unavailable
};

CudaProbe cuda_probe();
int sm_count();

} // namespace ninfer::kernels
