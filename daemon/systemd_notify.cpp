// ninfer::daemon - load-time EXTEND_TIMEOUT_USEC and the engine-progress watchdog (sd_notify).
#include "daemon/systemd_notify.h"

#include "daemon/log.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <systemd/sd-daemon.h>

namespace ninfer::daemon {
namespace {

constexpr uint64_t kLoadFloorBytesPerSecond = 20ull << 20; // a slow disk; slower than this is a hang
constexpr uint64_t kMinLoadBudgetMs = 10 * 60 * 1000;

// The artifact and its part files (NAME.part-*), in bytes; 0 when unreadable.
uint64_t artifact_bytes(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path main(path);
    uint64_t total = fs::file_size(main, ec);
    if (ec) return 0;
    std::string part_prefix = main.filename().string() + ".part-";
    fs::path dir = main.has_parent_path() ? main.parent_path() : fs::path(".");
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
        if (e.path().filename().string().rfind(part_prefix, 0) != 0) continue;
        uint64_t size = e.file_size(ec);
        if (!ec) total += size;
    }
    return total;
}

} // namespace

uint64_t engine_progress(const core::EngineStats& s) {
    return s.n_steps_total.load() + s.n_prompt_tokens_total.load() + s.n_requests_finished_total.load() +
           s.n_requests_cancelled_total.load() + s.n_requests_rejected_total.load();
}

bool engine_is_healthy(uint64_t previous_progress, uint64_t progress, size_t n_sessions) {
    return progress != previous_progress || n_sessions == 0;
}

void ServiceNotifier::start_loading(const std::string& artifact_path) {
    uint64_t bytes = artifact_bytes(artifact_path);
    load_budget_ms_ = std::max(kMinLoadBudgetMs, bytes / kLoadFloorBytesPerSecond * 1000);
    load_started_ms_ = uv_now(ctx_.loop);
    uv_timer_init(ctx_.loop, &load_timer_);
    load_timer_.data = this;
    load_timer_live_ = true;
    uv_timer_start(&load_timer_, [](uv_timer_t* t) { static_cast<ServiceNotifier*>(t->data)->load_tick(); }, 0,
                   kLoadTickSeconds * 1000);
}

void ServiceNotifier::load_tick() {
    uint64_t elapsed_ms = uv_now(ctx_.loop) - load_started_ms_;
    if (elapsed_ms > load_budget_ms_) {
        log_warning("engine, model load exceeds its budget of " + std::to_string(load_budget_ms_ / 1000) +
                    " s: no longer extending the start timeout");
        uv_timer_stop(&load_timer_);
        return;
    }
    sd_notifyf(0, "STATUS=loading the model (%llu s)\nEXTEND_TIMEOUT_USEC=%llu",
               static_cast<unsigned long long>(elapsed_ms / 1000),
               static_cast<unsigned long long>(3 * kLoadTickSeconds * 1000000));
}

void ServiceNotifier::start_watchdog() {
    if (load_timer_live_) uv_timer_stop(&load_timer_);
    uint64_t usec = 0;
    if (watchdog_timer_live_ || sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return;
    last_progress_ = engine_progress(ctx_.engine->stats());
    uv_timer_init(ctx_.loop, &watchdog_timer_);
    watchdog_timer_.data = this;
    watchdog_timer_live_ = true;
    uint64_t period_ms = std::max<uint64_t>(1, usec / 2000);
    sd_notify(0, "WATCHDOG=1");
    uv_timer_start(&watchdog_timer_, [](uv_timer_t* t) { static_cast<ServiceNotifier*>(t->data)->watchdog_tick(); },
                   period_ms, period_ms);
}

void ServiceNotifier::watchdog_tick() {
    uint64_t progress = engine_progress(ctx_.engine->stats());
    bool healthy = engine_is_healthy(last_progress_, progress, ctx_.sessions.size());
    last_progress_ = progress;
    if (healthy) {
        sd_notify(0, "WATCHDOG=1");
        stall_logged_ = false;
        return;
    }
    if (!stall_logged_)
        log_error("engine, no progress with " + std::to_string(ctx_.sessions.size()) +
                  " requests in flight: withholding the watchdog ping");
    stall_logged_ = true;
}

void ServiceNotifier::stop() {
    if (load_timer_live_) uv_close(reinterpret_cast<uv_handle_t*>(&load_timer_), nullptr);
    if (watchdog_timer_live_) uv_close(reinterpret_cast<uv_handle_t*>(&watchdog_timer_), nullptr);
    load_timer_live_ = watchdog_timer_live_ = false;
}

} // namespace ninfer::daemon
