// ninfer::daemon - journald specifics on top of log.h: the native entry with source location and
// NINFER_* fields, catalogued events (MESSAGE_ID) and the one log line per finished request.
//
// Contract:
// - journal_send() writes one native journal entry: MESSAGE, PRIORITY (syslog level of `level`),
//   CODE_FILE/CODE_LINE/CODE_FUNC of the caller, and NINFER_REQUEST_ID / NINFER_SLOT / NINFER_OP /
//   MESSAGE_ID when set. log.cpp calls it when logging to the journal (log_is_journal()).
//   sd_journal_sendv returns 0 even with no journald listening: delivery is tested by reading
//   the journal back (tests/blackbox/test_journald.sh), never by the return code.
// - log_event() logs at the event's level (event_level: Error for engine-failed, Info for the others).
// - log_event() / log_op() log through the active sink: the journal with the extra fields, or a
//   stderr line that carries them as "op=NAME" / "event=NAME" words.
// - The MESSAGE_ID values are stable; systemd/ninfer.catalog explains each one (journalctl -x).
// - log_request_finished() is the one line per finished request: tokens, cached tokens, timings
//   and finish reason, never prompt or output text. Info level, NINFER_OP=request.
// Thread-safe like log.h.
#pragma once

#include "core/engine/generation.h"
#include "daemon/log.h"

#include <cstdint>
#include <source_location>
#include <string_view>

namespace ninfer::daemon {

enum class LogEvent : uint8_t { ModelLoaded, SnapshotSaved, UpgradeDone, ConfigReloaded, EngineFailed };

std::string_view message_id(LogEvent event); // 32 hex digits
std::string_view event_name(LogEvent event); // "model-loaded", ...
LogLevel event_level(LogEvent event);

struct LogFields {
    uint64_t request_id = 0; // 0 = none
    int slot = -1;           // -1 = none
    std::string_view op;     // NINFER_OP, "" = none
    std::string_view message_id;
};

void journal_send(LogLevel level, std::string_view message, const LogFields& fields, const std::source_location& where);

void log_event(LogEvent event, std::string_view message, LogFields fields = {},
               std::source_location where = std::source_location::current());
void log_op(LogLevel level, std::string_view op, std::string_view message, LogFields fields = {},
            std::source_location where = std::source_location::current());
void log_request_finished(uint64_t request_id, const core::GenerationSummary& summary, std::string_view finish_reason,
                          double total_ms, std::source_location where = std::source_location::current());

} // namespace ninfer::daemon
