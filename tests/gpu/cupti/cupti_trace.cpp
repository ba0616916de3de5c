// ninfer - a kernel timeline of any CUDA program, for the GPU machine that has no nsys: a CUPTI
// injection library (CUDA_INJECTION64_PATH=libninfer_cupti_trace.so) that records every kernel,
// graph nodes included (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: one record per kernel node, PDL
// overlap kept), and at exit writes them as a CSV in the column names of `nsys stats --report
// cuda_gpu_trace` ("Start (ns)", "Duration (ns)", "Name", demangled) to $NINFER_TRACE_OUT, so that
// tests/gpu/trace_step.py reads either. Built by tests/gpu/build_cupti_trace.sh; not part of the
// product build (CI has no CUPTI).
#include <cupti.h>

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
    uint64_t start, end;
    std::string name;
};

std::mutex g_mutex;
std::vector<KernelRecord> g_records;
uint64_t g_dropped = 0;

constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;
}

std::string demangle(const char* mangled) {
    int status = 0;
    char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string out = status == 0 && d ? d : mangled;
    free(d);
    return out;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
    CUpti_Activity* record = nullptr;
    std::vector<KernelRecord> got;
    while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        got.push_back({k->start, k->end, demangle(k->name)});
    }
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
    free(buffer);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_dropped += dropped;
    for (auto& r : got) g_records.push_back(std::move(r));
}

void write_trace() {
    cuptiActivityFlushAll(1);
    const char* path = getenv("NINFER_TRACE_OUT");
    FILE* f = fopen(path ? path : "cupti_trace.csv", "w");
    if (!f) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    fprintf(f, "\"Start (ns)\",\"Duration (ns)\",\"Name\"\n");
    for (const KernelRecord& r : g_records) {
        std::string name = r.name;
        for (char& ch : name)
            if (ch == '"') ch = '\'';
        fprintf(f, "%llu,%llu,\"%s\"\n", (unsigned long long)r.start, (unsigned long long)(r.end - r.start), name.c_str());
    }
    fclose(f);
    fprintf(stderr, "cupti_trace: %zu kernels written, %llu records dropped\n", g_records.size(),
            (unsigned long long)g_dropped);
}

} // namespace

extern "C" int InitializeInjection() {
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
    if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) return 0;
    atexit(write_trace);
    return 1;
}
