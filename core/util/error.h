// ninfer::core - the one exception type core throws at its API boundary, and its kind.
//
// Contract: messages are one line, start with the subsystem ("artifact: ", "convert: ", ...) and
// name the problem and the offending value, so a user can act on them without a debugger.
// Every Error carries an Errc saying what kind of failure it is (Invalid unless the thrower says
// otherwise); callers decide on the kind, never on the message text. The daemon maps kinds to
// control statuses (daemon/control_server.h control_status) and to HTTP errors
// (daemon/api_error.h api_error_of), one switch each; tools print what() and exit 1.
// ErrorInfo carries an error across threads as a value (engine or I/O worker -> loop thread).
#pragma once

#include <cerrno>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ninfer {

enum class Errc : uint8_t {
    Invalid,     // bad input: an argument, a request, a file's contents (the default)
    NotFound,    // no such file, slot, cache entry
    Busy,        // the target is in use now; a later try may succeed
    Io,          // the OS failed a read, write or fsync
    NoSpace,     // the disk or the memory plan has no room
    Unavailable, // the engine cannot serve (it failed, or it is stopping)
    Internal,    // an invariant did not hold (a bug); also any exception that is not an Error
};

class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& message) : Error(Errc::Invalid, message) {}
    Error(Errc kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    Errc kind() const noexcept { return kind_; }

  private:
    Errc kind_;
};

struct ErrorInfo {
    Errc kind = Errc::Internal;
    std::string message;
};

// An Error's kind and message; any other exception is Internal with its what().
inline ErrorInfo error_info(const std::exception& e) {
    if (const auto* error = dynamic_cast<const Error*>(&e)) return {error->kind(), error->what()};
    return {Errc::Internal, e.what()};
}

// ENOENT/ENOTDIR -> NotFound, ENOSPC/EDQUOT -> NoSpace, EBUSY/ETXTBSY -> Busy, else Io.
inline Errc errc_of_errno(int err) {
    switch (err) {
    case ENOENT:
    case ENOTDIR: return Errc::NotFound;
    case ENOSPC:
    case EDQUOT: return Errc::NoSpace;
    case EBUSY:
    case ETXTBSY: return Errc::Busy;
    default: return Errc::Io;
    }
}

// "invalid", "not found", ... (log lines).
inline std::string_view errc_name(Errc kind) {
    switch (kind) {
    case Errc::Invalid: return "invalid";
    case Errc::NotFound: return "not found";
    case Errc::Busy: return "busy";
    case Errc::Io: return "i/o error";
    case Errc::NoSpace: return "no space";
    case Errc::Unavailable: return "unavailable";
    case Errc::Internal: return "internal error";
    }
    return "internal error";
}

} // namespace ninfer
