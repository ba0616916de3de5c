// ninfer::ctl - what every control command shares: the global options, the connection to the
// daemon's control socket, exit codes and output helpers.
//
// Contract:
// - Global options (--socket PATH, --json, --timeout S; also --opt=value) may come before the
//   command (main.cpp stores them with take_global_options) or anywhere after it (each control
//   command takes them from its own arguments). Defaults: socket $NINFER_CONTROL_SOCKET or
//   /run/ninfer/ctl/control.sock, timeout 5 s.
// - run_control(argc, argv, usage, body) parses the arguments into ControlArgs, runs body and maps
//   failures to exit codes: UsageError -> 2 (usage on stderr), proto::ClientError CannotConnect ->
//   3, any other ClientError or ninfer::Error -> 1; the message goes to stderr prefixed
//   "ninferctl: ". Connecting and every reply honour the timeout, so nothing hangs.
// - With --json a command prints exactly one JSON document (metrics --watch: one per line).
#pragma once

#include "proto/client.h"
#include "proto/messages.h"

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ninfer::ctl {

struct GlobalOptions {
    std::string socket;
    bool json = false;
    double timeout_s = 5.0;
};

GlobalOptions& global_options();

class UsageError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// Removes the global options from args (throws UsageError on a bad value).
void take_global_options(std::vector<std::string>& args, GlobalOptions& into);

struct ControlArgs {
    std::vector<std::string> positional; // arguments left after the global options
    GlobalOptions options;
};

int run_control(int argc, char** argv, const char* usage, const std::function<int(ControlArgs&)>& body);

proto::Client connect_daemon(const GlobalOptions& options);

// One request, one reply payload decoded as T (throws ClientError Protocol when malformed).
template <typename T> T call_daemon(proto::Client& client, proto::Op op, const std::vector<uint8_t>& payload) {
    proto::Frame reply = client.call(op, payload);
    std::optional<T> value = proto::decode_payload<T>(reply.payload);
    if (!value) throw proto::ClientError(proto::ClientError::Kind::Protocol, "malformed reply from the daemon");
    return *value;
}

std::string format_bytes(uint64_t bytes); // "1.50 GiB", "12.0 MiB", "512 B"
uint64_t parse_seconds_arg(const std::string& text, const char* what); // throws UsageError

} // namespace ninfer::ctl
