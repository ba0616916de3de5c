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

} // namespace ninfer::daemon
