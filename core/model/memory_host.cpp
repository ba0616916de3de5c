// ninfer::core - host memory the plan may use: MemAvailable, lowered to the memory cgroup's room.
#include "core/model/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

namespace ninfer::core {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kNoRoom = std::numeric_limits<uint64_t>::max();

// The first number in a cgroup file, or nullopt ("max", absent, unreadable).
std::optional<uint64_t> read_number(const fs::path& file) {
    std::ifstream in(file);
    uint64_t v = 0;
    if (!(in >> v)) return std::nullopt;
    return v;
}

// `key`'s value in a memory.stat file (0 when absent).
uint64_t stat_value(const fs::path& file, const std::string& key) {
    std::ifstream in(file);
    std::string k;
    uint64_t v = 0;
    while (in >> k >> v)
        if (k == key) return v;
    return 0;
}

// The directory of `path` under `base`; when the hierarchy is mounted from inside (a container's
// own cgroup bind-mounted as the root), the longest suffix of `path` that exists there.
fs::path cgroup_dir(const fs::path& base, const std::string& path) {
    std::vector<std::string> parts;
    std::istringstream in(path);
    for (std::string p; std::getline(in, p, '/');)
        if (!p.empty()) parts.push_back(p);
    std::error_code ec;
    for (size_t skip = 0; skip <= parts.size(); ++skip) {
        fs::path dir = base;
        for (size_t i = skip; i < parts.size(); ++i) dir /= parts[i];
        if (fs::is_directory(dir, ec)) return dir;
    }
    return base;
}

// The tightest limit - working set (usage minus inactive file cache, which the kernel reclaims
// before it would OOM) from `dir` up to `base`.
uint64_t room_up_to(const fs::path& base, fs::path dir, const char* limit_file, const char* usage_file,
                    const char* inactive_key) {
    uint64_t room = kNoRoom;
    const uint64_t unlimited = uint64_t(1) << 62; // v1 writes its "no limit" as about 2^63
    for (;;) {
        std::optional<uint64_t> limit = read_number(dir / limit_file);
        if (limit && *limit < unlimited) {
            const uint64_t usage = read_number(dir / usage_file).value_or(0);
            const uint64_t inactive = stat_value(dir / "memory.stat", inactive_key);
            const uint64_t working = usage > inactive ? usage - inactive : 0;
            room = std::min(room, *limit > working ? *limit - working : 0);
        }
        if (dir == base || !dir.has_parent_path() || dir.parent_path() == dir) break;
        dir = dir.parent_path();
    }
    return room;
}

} // namespace

uint64_t cgroup_memory_room(const std::string& proc_self_cgroup, const std::string& sysfs_root) {
    uint64_t room = kNoRoom;
    std::istringstream lines(proc_self_cgroup);
    for (std::string line; std::getline(lines, line);) {
        const size_t a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        if (id == "0" && controllers.empty()) { // v2: memory.max / memory.current at every level
            const fs::path base(sysfs_root);
            room = std::min(room, room_up_to(base, cgroup_dir(base, path), "memory.max", "memory.current", "inactive_file"));
        } else if (("," + controllers + ",").find(",memory,") != std::string::npos) { // v1 memory controller
            const fs::path base = fs::path(sysfs_root) / "memory";
            room = std::min(room, room_up_to(base, cgroup_dir(base, path), "memory.limit_in_bytes", "memory.usage_in_bytes",
                                             "total_inactive_file"));
        }
    }
    return room;
}

uint64_t host_available_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    uint64_t kib = 0, available = 0;
    while (in >> key >> kib >> unit)
        if (key == "MemAvailable:") {
            available = kib * 1024;
            break;
        }
    std::ifstream cgroup("/proc/self/cgroup");
    std::stringstream text;
    text << cgroup.rdbuf();
    return std::min(available, cgroup_memory_room(text.str(), "/sys/fs/cgroup"));
}

uint64_t host_default_margin(uint64_t available) {
    return std::max<uint64_t>(512ull << 20, available / 10);
}

} // namespace ninfer::core
