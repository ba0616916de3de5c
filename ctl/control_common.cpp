// ninfer::ctl - global options, the daemon connection and exit-code mapping of control commands.
#include "ctl/control_common.h"

#include "core/util/error.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ninfer::ctl {

GlobalOptions& global_options() {
    static GlobalOptions options = [] {
        GlobalOptions o;
        const char* env = std::getenv("NINFER_CONTROL_SOCKET");
        o.socket = env && *env ? env : "/run/ninfer/ctl/control.sock";
        return o;
    }();
    return options;
}

void take_global_options(std::vector<std::string>& args, GlobalOptions& into) {
    std::vector<std::string> rest;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string a = args[i], value;
        size_t eq = a.find('=');
        std::string name = a.rfind("--", 0) == 0 && eq != std::string::npos ? a.substr(0, eq) : a;
        bool inline_value = name.size() != a.size();
        auto take_value = [&]() -> std::string {
            if (inline_value) return a.substr(eq + 1);
            if (i + 1 >= args.size()) throw UsageError(name + " needs a value");
            return args[++i];
        };
        if (name == "--json" && !inline_value) {
            into.json = true;
        } else if (name == "--socket") {
            into.socket = take_value();
            if (into.socket.empty()) throw UsageError("--socket needs a path");
        } else if (name == "--timeout") {
            std::string v = take_value();
            char* end = nullptr;
            double s = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !std::isfinite(s) || s <= 0 || s > 86400)
                throw UsageError("--timeout wants seconds in (0, 86400], not '" + v + "'");
            into.timeout_s = s;
        } else {
            rest.push_back(args[i]);
        }
    }
    args = std::move(rest);
}

int run_control(int argc, char** argv, const char* usage, const std::function<int(ControlArgs&)>& body) {
    ControlArgs args;
    args.options = global_options();
    try {
        args.positional.assign(argv, argv + argc);
        for (const std::string& a : args.positional)
            if (a == "--help" || a == "-h") {
                std::printf("usage: %s\n", usage);
                return 0;
            }
        take_global_options(args.positional, args.options);
        return body(args);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "ninferctl: %s\nusage: %s\n", e.what(), usage);
        return 2;
    } catch (const proto::ClientError& e) {
        std::fprintf(stderr, "ninferctl: %s\n", e.what());
        return e.kind() == proto::ClientError::Kind::CannotConnect ? 3 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ninferctl: %s\n", e.what());
        return 1;
    }
}

proto::Client connect_daemon(const GlobalOptions& options) {
    int timeout_ms = int(std::ceil(options.timeout_s * 1000));
    proto::Client client = proto::Client::connect(options.socket, timeout_ms);
    client.set_timeout_ms(timeout_ms);
    return client;
}

std::string format_bytes(uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(bytes);
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        ++u;
    }
    char buf[32];
    if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    else std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : "%.1f %s", v, units[u]);
    return buf;
}

uint64_t parse_seconds_arg(const std::string& text, const char* what) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || *end || text[0] == '-' || v > 365ull * 86400 * 100)
        throw UsageError(std::string(what) + " wants whole seconds, not '" + text + "'");
    return v;
}

} // namespace ninfer::ctl
