// ninfer::daemon - logging sinks: journald native protocol or timestamped stderr lines.
#include "daemon/log.h"

#include "daemon/journal.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <sys/stat.h>
#include <sys/time.h>

namespace ninfer::daemon {
namespace {

std::atomic<int> g_level{int(LogLevel::Info)};
std::atomic<bool> g_journal{false};
std::mutex g_stderr_mutex;

constexpr const char* kLevelNames[] = {"debug", "info", "warning", "error"};

bool stderr_is_journal() {
    const char* stream = std::getenv("JOURNAL_STREAM");
    if (!stream) return false;
    unsigned long long dev = 0, ino = 0;
    if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
    struct stat st{};
    return fstat(2, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

} // namespace

LogLevel parse_log_level(std::string_view name) {
    for (int i = 0; i < 4; ++i)
        if (name == kLevelNames[i]) return LogLevel(i);
    return LogLevel::Info;
}

void log_init(LogLevel level) {
    g_level = int(level);
    g_journal = stderr_is_journal();
}

void log_set_level(LogLevel level) { g_level = int(level); }
bool log_enabled(LogLevel level) { return int(level) >= g_level.load(std::memory_order_relaxed); }
bool log_is_journal() { return g_journal; }

void log_write(LogLevel level, std::string_view message, uint64_t request_id, int slot, std::source_location where) {
    if (!log_enabled(level)) return;
    if (g_journal) {
        LogFields fields;
        fields.request_id = request_id;
        fields.slot = slot;
        return journal_send(level, message, fields, where);
    }
    std::string text(message);
    timeval tv{};
    gettimeofday(&tv, nullptr);
    tm utc{};
    gmtime_r(&tv.tv_sec, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
    std::string prefix;
    if (request_id) prefix += "req=" + std::to_string(request_id) + " ";
    if (slot >= 0) prefix += "slot=" + std::to_string(slot) + " ";
    std::lock_guard lock(g_stderr_mutex);
    std::fprintf(stderr, "%s.%03dZ %s %s%s\n", stamp, int(tv.tv_usec / 1000), kLevelNames[int(level)],
                 prefix.c_str(), text.c_str());
}

std::optional<std::string> RepeatedLog::line(uint64_t now_ms, const std::string& message) {
    if (has_logged_ && now_ms - last_ms_ < interval_ms_) {
        ++n_suppressed_;
        return std::nullopt;
    }
    std::string out = message;
    if (n_suppressed_) out += " (" + std::to_string(n_suppressed_) + " more like it not logged)";
    has_logged_ = true;
    last_ms_ = now_ms;
    n_suppressed_ = 0;
    return out;
}

} // namespace ninfer::daemon
