// ninfer::daemon - levelled logging: journald native fields under systemd, ISO lines otherwise.
//
// Contract:
// - log_init(level) picks the sink once: journald (sd_journal_send with PRIORITY and NINFER_*
//   fields) when $JOURNAL_STREAM matches stderr's device:inode, else "2026-01-01T00:00:00.000Z
//   level message" lines on stderr. log_set_level may run later (SIGHUP).
// - Messages start with the subsystem ("http, ...", "engine, ..."). Never log prompt or generated
//   text at info; request detail carries NINFER_REQUEST_ID (log_req).
// - Thread-safe: any thread may log (one write per line).
#pragma once

#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>

namespace ninfer::daemon {

enum class LogLevel : int { Debug = 0, Info = 1, Warning = 2, Error = 3 };

LogLevel parse_log_level(std::string_view name); // "debug|info|warning|error"
void log_init(LogLevel level);
void log_set_level(LogLevel level);
bool log_enabled(LogLevel level);
bool log_is_journal();
// `where` becomes CODE_FILE/CODE_LINE/CODE_FUNC in the journal (journal.h): the caller's location.
void log_write(LogLevel level, std::string_view message, uint64_t request_id = 0, int slot = -1,
               std::source_location where = std::source_location::current());

using SourceLocation = std::source_location;
inline void log_debug(std::string_view m, SourceLocation w = SourceLocation::current()) {
    if (log_enabled(LogLevel::Debug)) log_write(LogLevel::Debug, m, 0, -1, w);
}
inline void log_info(std::string_view m, SourceLocation w = SourceLocation::current()) { log_write(LogLevel::Info, m, 0, -1, w); }
inline void log_warning(std::string_view m, SourceLocation w = SourceLocation::current()) {
    log_write(LogLevel::Warning, m, 0, -1, w);
}
inline void log_error(std::string_view m, SourceLocation w = SourceLocation::current()) { log_write(LogLevel::Error, m, 0, -1, w); }
inline void log_req(LogLevel level, uint64_t request_id, std::string_view m, int slot = -1,
                    SourceLocation w = SourceLocation::current()) {
    log_write(level, m, request_id, slot, w);
}

// A warning that may repeat at a high rate (one per refused connection): at most one line per
// interval_ms, the next one saying how many were left out. One instance per call site.
class RepeatedLog {
  public:
    explicit RepeatedLog(uint64_t interval_ms) : interval_ms_(interval_ms) {}
    // The line to log now, or nullopt within interval_ms of the last one (counted as left out).
    std::optional<std::string> line(uint64_t now_ms, const std::string& message);
    void warning(uint64_t now_ms, const std::string& message) {
        if (auto l = line(now_ms, message)) log_warning(*l);
    }

  private:
    uint64_t interval_ms_;
    uint64_t last_ms_ = 0;
    bool has_logged_ = false;
    uint64_t n_suppressed_ = 0;
};

} // namespace ninfer::daemon
