// ninfer::daemon - /metrics in the Prometheus text format (version 0.0.4): ninfer_* series and the
// llama.cpp names (llamacpp:*) that llama-swap and dashboards read.
//
// Contract: render_metrics reads the engine's atomics and the loop's counters (loop thread) and
// returns text that python3-prometheus-client parses: every family has # HELP and # TYPE,
// counters end in _total, histograms have cumulative _bucket{le} + _sum + _count.
#pragma once

#include "daemon/daemon_context.h"

#include <string>

namespace ninfer::daemon {

std::string render_metrics(const DaemonContext& ctx);

} // namespace ninfer::daemon
