// ninfer::core - a signal-safe registry of temp files to unlink when a fatal signal arrives.
#include "core/util/temp_cleanup.h"

#include <atomic>
#include <climits>
#include <csignal>
#include <cstring>

#include <unistd.h>

namespace ninfer::core {
namespace {

enum SlotState : int { kFree = 0, kWriting = 1, kReady = 2 };

struct Slot {
    std::atomic<int> state{kFree};
    char path[PATH_MAX];
};

Slot g_slots[kTempCleanupSlots];
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

void on_fatal_signal(int sig) {
    for (Slot& s : g_slots)
        if (s.state.load(std::memory_order_acquire) == kReady) ::unlink(s.path);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
    ::raise(sig); // delivered when this handler returns (the signal is blocked while it runs)
}

} // namespace

void install_temp_cleanup_on_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : kSignals) sigaddset(&sa.sa_mask, sig); // one cleanup at a time
    for (int sig : kSignals) ::sigaction(sig, &sa, nullptr);
}

int temp_cleanup_register(const std::string& path) {
    if (path.empty() || path.size() >= PATH_MAX) return -1;
    for (int i = 0; i < kTempCleanupSlots; ++i) {
        int expected = kFree;
        if (!g_slots[i].state.compare_exchange_strong(expected, kWriting, std::memory_order_acq_rel)) continue;
        std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
        g_slots[i].state.store(kReady, std::memory_order_release);
        return i;
    }
    return -1;
}

void temp_cleanup_unregister(int slot) {
    if (slot < 0 || slot >= kTempCleanupSlots) return;
    g_slots[slot].state.store(kFree, std::memory_order_release);
}

} // namespace ninfer::core
