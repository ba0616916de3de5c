// ninfer::daemon - /metrics in the Prometheus text format (version 0.0.4): ninfer_* series and the
// llama.cpp names (llamacpp:*) that llama-swap and dashboards read.
//
// Contract: render_metrics reads the engine's atomics and the loop's counters (loop thread) and
// returns text that python3-prometheus-client parses: every family has # HELP and # TYPE,
// counters end in _total, histograms have cumulative _bucket{le} + _sum + _count.
// Memory, in bytes: the process's resident set now and its peak (ninfer_process_resident_bytes,
// _peak_bytes: VmRSS and VmHWM of /proc/self/status) and the HTTP server's request-scoped peaks
// (ninfer_http_*_peak_bytes: HttpServer::memory_peaks, daemon/http_server.h).
// read_process_memory() is those two /proc figures (0 where unreadable).
#pragma once

#include "daemon/daemon_context.h"

#include <string>

namespace ninfer::daemon {

std::string render_metrics(const DaemonContext& ctx);

struct ProcessMemory {
    uint64_t resident_bytes = 0;      // VmRSS
    uint64_t resident_peak_bytes = 0; // VmHWM: the most resident since start
};
ProcessMemory read_process_memory();

} // namespace ninfer::daemon
