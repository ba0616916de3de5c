// ninfer::daemon - native journal entries with NINFER_* fields, catalogued events and request lines.
#include "daemon/journal.h"

#include <cstdio>
#include <string>
#include <sys/uio.h>

#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

namespace ninfer::daemon {
namespace {

constexpr int kSyslogPriority[] = {7, 6, 4, 3}; // LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR

struct EventInfo {
    std::string_view id;
    std::string_view name;
    LogLevel level = LogLevel::Info;
};

// Keep in step with systemd/ninfer.catalog.
constexpr EventInfo kEvents[] = {
    {"57deee9d411f4123b8265e9ccc225398", "model-loaded"},
    {"a4855475419643c2bfbf49c4de64486b", "snapshot-saved"},
    {"4f3f293e821e46d0816e87ee8eac611f", "upgrade-done"},
    {"847e7fccae1f4801873a42413f0e37d7", "config-reloaded"},
    {"349cb30e62aa4328822706244b97dac4", "engine-failed", LogLevel::Error},
};

// The words a stderr line carries instead of journal fields.
std::string text_prefix(const LogFields& f, std::string_view event) {
    std::string out;
    if (!event.empty()) out += "event=" + std::string(event) + " ";
    if (!f.op.empty()) out += "op=" + std::string(f.op) + " ";
    return out;
}

} // namespace

std::string_view message_id(LogEvent event) { return kEvents[int(event)].id; }
std::string_view event_name(LogEvent event) { return kEvents[int(event)].name; }
LogLevel event_level(LogEvent event) { return kEvents[int(event)].level; }

void journal_send(LogLevel level, std::string_view message, const LogFields& f, const std::source_location& where) {
    std::string fields[9];
    int n = 0;
    fields[n++] = "MESSAGE=" + std::string(message);
    fields[n++] = "PRIORITY=" + std::to_string(kSyslogPriority[int(level)]);
    fields[n++] = std::string("CODE_FILE=") + where.file_name();
    fields[n++] = "CODE_LINE=" + std::to_string(where.line());
    fields[n++] = std::string("CODE_FUNC=") + where.function_name();
    if (f.request_id) fields[n++] = "NINFER_REQUEST_ID=" + std::to_string(f.request_id);
    if (f.slot >= 0) fields[n++] = "NINFER_SLOT=" + std::to_string(f.slot);
    if (!f.op.empty()) fields[n++] = "NINFER_OP=" + std::string(f.op);
    if (!f.message_id.empty()) fields[n++] = "MESSAGE_ID=" + std::string(f.message_id);
    iovec iov[9];
    for (int i = 0; i < n; ++i) iov[i] = {fields[i].data(), fields[i].size()};
    sd_journal_sendv(iov, n);
}

void log_event(LogEvent event, std::string_view message, LogFields fields, std::source_location where) {
    const LogLevel level = event_level(event);
    if (!log_enabled(level)) return;
    fields.message_id = message_id(event);
    if (log_is_journal()) return journal_send(level, message, fields, where);
    log_write(level, text_prefix(fields, event_name(event)) + std::string(message), fields.request_id,
              fields.slot);
}

void log_op(LogLevel level, std::string_view op, std::string_view message, LogFields fields,
            std::source_location where) {
    if (!log_enabled(level)) return;
    fields.op = op;
    if (log_is_journal()) return journal_send(level, message, fields, where);
    log_write(level, text_prefix(fields, "") + std::string(message), fields.request_id, fields.slot);
}

void log_request_finished(uint64_t request_id, const core::GenerationSummary& s, std::string_view finish_reason,
                          double total_ms, std::source_location where) {
    if (!log_enabled(LogLevel::Info)) return;
    char text[320];
    std::snprintf(text, sizeof text,
                  "request, finished: reason=%.*s prompt_tokens=%u cached_tokens=%u completion_tokens=%u "
                  "queue_ms=%.1f prompt_ms=%.1f decode_ms=%.1f total_ms=%.1f",
                  int(finish_reason.size()), finish_reason.data(), s.prompt_tokens, s.cached_tokens,
                  s.completion_tokens, s.queue_ms, s.prompt_ms, s.decode_ms, total_ms);
    LogFields fields;
    fields.request_id = request_id;
    fields.slot = s.lane;
    log_op(LogLevel::Info, "request", text, fields, where);
}

} // namespace ninfer::daemon
