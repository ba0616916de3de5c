// ninfer::core - temp files removed when a tool dies of a signal (Ctrl-C during ninferctl convert).
//
// Contract:
// - install_temp_cleanup_on_signals() (a tool's main, once; never ninferd, which handles its own
//   signals): SIGINT, SIGTERM, SIGHUP and SIGQUIT then unlink every registered temp path and
//   re-raise the signal with its default action, so the process still dies of that signal (exit
//   status 128 + N in a shell) and leaves no hidden multi-GB `.name.tmp.XXXXXX` behind.
// - temp_cleanup_register(path) records a path (AtomicFile registers its temp file) and returns
//   its slot, or -1 when all kTempCleanupSlots are taken (that file is then removed only by normal
//   unwinding); temp_cleanup_unregister(slot) forgets it (after a rename or an unlink; -1 is a no-op).
//   Paths longer than PATH_MAX - 1 are not recorded (-1).
// - The handler only reads atomics and calls unlink, sigaction and raise: async-signal-safe.
// Thread safety: register/unregister from any thread.
#pragma once

#include <string>

namespace ninfer::core {

inline constexpr int kTempCleanupSlots = 16;

void install_temp_cleanup_on_signals();
int temp_cleanup_register(const std::string& path);
void temp_cleanup_unregister(int slot);

} // namespace ninfer::core
