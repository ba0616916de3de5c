// ninfer::proto - a blocking client connection to the daemon's control socket (ninferctl's side).
//
// Contract:
// - connect(path, timeout_ms) returns a connected client or a ClientError with kind
//   CannotConnect (missing socket, refused, permission, timeout). While the daemon's listen
//   backlog is full (EAGAIN) it tries again until the timeout; it never hangs past it.
// - call(op, payload) sends one request frame and waits (up to the timeout) for the reply frame
//   with the same request id. A reply with a non-Ok status carries an ErrorReply message, which
//   becomes a ClientError of kind Refused. receive() reads the next frame of a streamed reply.
// - Not thread-safe: one thread per Client.
#pragma once

#include "proto/frame.h"

#include <stdexcept>
#include <string>

namespace ninfer::proto {

class ClientError : public std::runtime_error {
  public:
    enum class Kind { CannotConnect, Refused, Protocol, Timeout };
    ClientError(Kind kind, const std::string& message, int32_t status = 0)
        : std::runtime_error(message), kind_(kind), status_(status) {}
    Kind kind() const { return kind_; }
    int32_t status() const { return status_; } // the reply's Status for Kind::Refused, else 0

  private:
    Kind kind_;
    int32_t status_;
};

class Client {
  public:
    static Client connect(const std::string& socket_path, int timeout_ms);
    Client(Client&& other) noexcept;
    Client& operator=(Client&&) = delete;
    ~Client();

    // Sends a request and returns the first reply frame (status Ok), or throws ClientError.
    Frame call(Op op, std::span<const uint8_t> payload);
    // Sends a request without waiting (first frame of a streamed exchange).
    void send(Op op, std::span<const uint8_t> payload);
    // The next frame for the current request; throws on timeout, close or error status.
    Frame receive();
    void set_timeout_ms(int ms) { timeout_ms_ = ms; }

  private:
    Client(int fd, int timeout_ms) : fd_(fd), timeout_ms_(timeout_ms) {}
    int fd_ = -1;
    int timeout_ms_ = 5000;
    uint64_t request_id_ = 0;
    FrameDecoder decoder_;
};

} // namespace ninfer::proto
