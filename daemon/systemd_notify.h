// ninfer::daemon - the sd_notify messages that need timers: EXTEND_TIMEOUT_USEC while the model
// loads, and WATCHDOG=1 driven by the engine's progress rather than by the loop alone.
//
// Contract:
// - start_loading(artifact_path): every kLoadTickSeconds sends "STATUS=loading the model (N s)"
//   and EXTEND_TIMEOUT_USEC=3 ticks, until the load budget (artifact bytes at 20 MiB/s, at least
//   10 min) is spent; then it stops extending so a hung load still hits TimeoutStartSec.
// - start_watchdog(): when systemd asked for a watchdog (sd_watchdog_enabled: WATCHDOG_USEC set and
//   WATCHDOG_PID unset or ours), sends WATCHDOG=1 every WATCHDOG_USEC/2, but only while
//   engine_is_healthy(): the engine made progress since the previous tick, or it holds no work.
//   A withheld ping is logged once per stall; systemd restarts the service after WatchdogSec.
//   So WatchdogSec must exceed the longest engine step (one prefill chunk).
// - stop() stops both timers (idempotent; call before the loop ends). The handles belong to
//   the caller's loop; the object must outlive it running.
// Loop thread only.
#pragma once

#include "daemon/daemon_context.h"

#include <cstdint>
#include <string>

#include <uv.h>

namespace ninfer::daemon {

// The engine's progress counter: grows with every step, admission and request end.
uint64_t engine_progress(const core::EngineStats& stats);
// True when a watchdog ping is deserved: progress moved, or nothing is waiting on the engine.
bool engine_is_healthy(uint64_t previous_progress, uint64_t progress, size_t n_sessions);

class ServiceNotifier {
  public:
    static constexpr uint64_t kLoadTickSeconds = 5;

    explicit ServiceNotifier(DaemonContext& ctx) : ctx_(ctx) {}
    ServiceNotifier(const ServiceNotifier&) = delete;
    ServiceNotifier& operator=(const ServiceNotifier&) = delete;

    void start_loading(const std::string& artifact_path);
    void start_watchdog();
    void stop();

  private:
    void load_tick();
    void watchdog_tick();

    DaemonContext& ctx_;
    uv_timer_t load_timer_{};
    uv_timer_t watchdog_timer_{};
    bool load_timer_live_ = false;
    bool watchdog_timer_live_ = false;
    uint64_t load_started_ms_ = 0;
    uint64_t load_budget_ms_ = 0;
    uint64_t last_progress_ = 0;
    bool stall_logged_ = false;
};

} // namespace ninfer::daemon
