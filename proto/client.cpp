// ninfer::proto - blocking control-socket client with timeouts (poll), used by ninferctl.
#include "proto/client.h"

#include "proto/messages.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace ninfer::proto {

namespace {
using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return left.count() > 0 ? int(left.count()) : 0;
}

[[noreturn]] void fail(ClientError::Kind kind, const std::string& what) { throw ClientError(kind, what); }
} // namespace

Client Client::connect(const std::string& path, int timeout_ms) {
    sockaddr_un addr{};
    if (path.size() >= sizeof addr.sun_path)
        fail(ClientError::Kind::CannotConnect, "socket path too long: " + path);
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        fail(ClientError::Kind::CannotConnect, std::string("socket: ") + std::strerror(errno));
    // A Unix socket whose listen backlog is full refuses a non-blocking connect with EAGAIN and
    // leaves the socket unconnected (polling it says nothing): try again until the deadline.
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    int rc = 0;
    for (int wait_ms = 5; (rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr)) != 0 && errno == EAGAIN;
         wait_ms = std::min(wait_ms * 2, 100)) {
        if (remaining_ms(deadline) == 0) {
            ::close(fd);
            fail(ClientError::Kind::CannotConnect, "cannot connect to " + path + ": timed out (the daemon's backlog is full)");
        }
        ::poll(nullptr, 0, std::min(wait_ms, remaining_ms(deadline)));
    }
    if (rc != 0) {
        int err = errno;
        if (err == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            int n = ::poll(&p, 1, remaining_ms(deadline));
            socklen_t len = sizeof err;
            if (n <= 0) {
                ::close(fd);
                fail(ClientError::Kind::CannotConnect, "cannot connect to " + path + ": timed out");
            }
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        }
        if (err != 0 && err != EINPROGRESS) {
            ::close(fd);
            fail(ClientError::Kind::CannotConnect,
                 "cannot connect to " + path + ": " + std::strerror(err) +
                     (err == ENOENT ? " (is ninferd running? see --socket)" : ""));
        }
    }
    return Client(fd, timeout_ms);
}

Client::Client(Client&& other) noexcept
    : fd_(other.fd_), timeout_ms_(other.timeout_ms_), request_id_(other.request_id_),
      decoder_(std::move(other.decoder_)) {
    other.fd_ = -1;
}

Client::~Client() {
    if (fd_ >= 0)
        ::close(fd_);
}

void Client::send(Op op, std::span<const uint8_t> payload) {
    FrameHeader h;
    h.op = uint16_t(op);
    h.request_id = ++request_id_;
    std::vector<uint8_t> bytes = encode_frame(h, payload);
    if (bytes.empty())
        fail(ClientError::Kind::Protocol, "request payload too large");
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
    size_t sent = 0;
    while (sent < bytes.size()) {
        ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += size_t(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            pollfd p{fd_, POLLOUT, 0};
            if (::poll(&p, 1, remaining_ms(deadline)) <= 0)
                fail(ClientError::Kind::Timeout, "timed out sending the request");
            continue;
        }
        fail(ClientError::Kind::Protocol, std::string("send: ") + std::strerror(errno));
    }
}

Frame Client::receive() {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
    for (;;) {
        if (std::optional<Frame> f = decoder_.next()) {
            if (f->header.request_id != request_id_ || !(f->header.flags & kFlagReply))
                continue; // a stale reply to an abandoned request
            if (f->header.status != int32_t(Status::Ok)) {
                auto err = decode_payload<ErrorReply>(f->payload);
                std::string msg = err ? err->message : std::string(status_str(Status(f->header.status)));
                throw ClientError(ClientError::Kind::Refused, msg, f->header.status);
            }
            return std::move(*f);
        }
        if (decoder_.has_error())
            fail(ClientError::Kind::Protocol, "bad reply from the daemon: " + decoder_.error());
        pollfd p{fd_, POLLIN, 0};
        int n = ::poll(&p, 1, remaining_ms(deadline));
        if (n == 0)
            fail(ClientError::Kind::Timeout, "timed out waiting for the daemon's reply");
        if (n < 0 && errno != EINTR)
            fail(ClientError::Kind::Protocol, std::string("poll: ") + std::strerror(errno));
        uint8_t buf[65536];
        ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
        if (got == 0)
            fail(ClientError::Kind::Protocol, "the daemon closed the connection");
        if (got < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            fail(ClientError::Kind::Protocol, std::string("recv: ") + std::strerror(errno));
        }
        decoder_.feed({buf, size_t(got)});
    }
}

Frame Client::call(Op op, std::span<const uint8_t> payload) {
    send(op, payload);
    return receive();
}

} // namespace ninfer::proto
