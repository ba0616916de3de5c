// ninfer::kernels - device probe: says plainly why CUDA is unavailable instead of failing.
#include "ninfer/kernels/device.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>

#ifndef NINFER_CUDA_ARCH_MAJOR
#define NINFER_CUDA_ARCH_MAJOR 9
#endif

namespace ninfer::kernels {

namespace {

CudaProbe probe_once() {
    CudaProbe probe;
    int driver_version = 0;
    cudaError_t err = cudaDriverGetVersion(&driver_version);
    if (err != cudaSuccess || driver_version == 0) {
        probe.reason = "no NVIDIA driver found (libcuda.so.1 not loadable)";
        return probe;
    }
    int n_devices = 0;
    err = cudaGetDeviceCount(&n_devices);
    if (err != cudaSuccess || n_devices == 0) {
        probe.reason = std::string("no CUDA device: ") +
                       (err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
        return probe;
    }
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, 0);
    if (err != cudaSuccess) {
        probe.reason = std::string("cannot query device 0: ") + cudaGetErrorString(err);
        return probe;
    }
    char line[sizeof prop.name + 96]; // the name plus the numbers after it: never truncated
    std::snprintf(line, sizeof line, "%s, sm_%d%d, %d SMs, %.1f GiB, driver %d.%d", prop.name,
                  prop.major, prop.minor, prop.multiProcessorCount,
                  double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                  driver_version / 1000, (driver_version % 1000) / 10);
    if (prop.major != NINFER_CUDA_ARCH_MAJOR) {
        probe.reason = std::string("device 0 (") + line + ") is not the architecture this build targets (sm_" +
                       std::to_string(NINFER_CUDA_ARCH_MAJOR) + "x)";
        return probe;
    }
    probe.ok = true;
    probe.reason = line;
    return probe;
}

} // namespace

CudaProbe cuda_probe() {
    static std::once_flag once;
    static CudaProbe cached;
    std::call_once(once, [] { cached = probe_once(); });
    return cached;
}

int sm_count() {
    static std::once_flag once;
    static int cached = 0;
    std::call_once(once, [] {
        if (!cuda_probe().ok || cudaDeviceGetAttribute(&cached, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess)
            cached = 0;
    });
    return cached;
}

} // namespace ninfer::kernels
