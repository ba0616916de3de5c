// ninfer::daemon - the control socket: ninferctl's Unix socket on the libuv loop (PROTOCOL.md).
//
// Contract (loop thread only):
// - start() listens on the socket systemd passed under FileDescriptorName=control, else on
//   config.control_socket: the parent directory (and missing ancestors) is created 0750 with
//   group ninfer-admin when missing, a lock file
//   (<socket>.lock, flock) makes a second daemon fail instead of stealing the socket, a stale
//   socket is unlinked, the socket is chmod 0660 and chgrp ninfer-admin (a missing group: warning,
//   the process group stays). Failure to listen is returned as a message; the daemon keeps serving
//   HTTP without a control socket.
// - Every connection's peer credentials decide its rights once: admin for uid 0, the daemon's uid
//   and a peer whose primary (SO_PEERCRED) or supplementary (SO_PEERGROUPS) groups at connect()
//   hold ninfer-admin; read-only otherwise.
//   Admin ops from a read-only peer get Status::Refused. Mutating ops are logged with the peer's
//   uid and pid.
// - Frames are decoded with proto::FrameDecoder; a protocol error is answered once and the
//   connection closed; unknown ops get UnknownOp; a payload that does not decode (for the ops
//   without a request payload: any byte) gets BadMessage. A peer that shuts down its sending
//   side gets every reply still due, then the connection closes. An error message is cut to
//   64 KiB so its reply fits the 1 MiB frame; a reply over the limit becomes an Internal error.
// - Backpressure: while a connection's unsent replies exceed output-buffer-kib it is not read
//   and no further frame of it is handled; metrics-watch skips a frame instead of queueing it.
//   Ops dispatch through one table (control_handlers.cpp). Ops on lane state are the engine's
//   typed operations (core::Engine::save_lane, restore_lane, erase_lane, evict, list_cache: the
//   engine runs them on its thread and its I/O worker, the handler only answers the result on the
//   loop thread); read-only figures come from atomics.
// - A failure reaches the client as control_status(kind) with the error's message: the one
//   mapping from ninfer::Errc to proto::Status (never a search of the message text).
#pragma once

#include "core/util/error.h"
#include "daemon/daemon_context.h"
#include "daemon/model_loader.h"
#include "proto/frame.h"

#include <functional>
#include <memory>
#include <set>
#include <string>

#include <uv.h>

namespace ninfer::daemon {

struct ControlDeps {
    DaemonContext* ctx = nullptr;
    const PlannedModel* model = nullptr;
    std::function<void()> reload;       // SIGHUP's work
    std::function<void()> drained;      // after `drain` stopped admission (--persist-slots saves lanes)
};

// NotFound -> NotFound, Busy -> Busy, Io -> Io, NoSpace -> NoSpace, Invalid -> Invalid,
// Unavailable -> Busy (the engine cannot take the op now), Internal -> Internal.
proto::Status control_status(Errc kind);

struct ControlConnection;

class ControlServer {
  public:
    ControlServer(uv_loop_t* loop, ControlDeps deps);
    ~ControlServer();
    std::string start(); // "" on success, else why there is no control socket
    void close();        // stop listening, close every connection (loop thread)

    // For the handlers (control_handlers.cpp).
    using ConnPtr = std::shared_ptr<ControlConnection>;
    void reply(const ConnPtr& c, const proto::Frame& request, proto::Status status, std::vector<uint8_t> payload,
               uint16_t extra_flags = 0);
    void reply_error(const ConnPtr& c, const proto::Frame& request, proto::Status status, const std::string& message);
    // control_status(kind); Io and NoSpace are logged as warnings, Internal as an error.
    void reply_error(const ConnPtr& c, const proto::Frame& request, const ErrorInfo& error);
    // Runs fn on the loop thread later (from the engine or I/O thread); dropped after close().
    void post(std::function<void()> fn);
    const ControlDeps& deps() const { return deps_; }
    void start_watch(const ConnPtr& c, const proto::Frame& request, uint32_t interval_ms, uint32_t count);

  private:
    friend struct ControlConnection;
    static void on_connection(uv_stream_t* server, int status);
    void accept_one();
    void on_frame(const ConnPtr& c, const proto::Frame& frame);
    void close_connection(const ConnPtr& c);
    void close_after_writes(const ConnPtr& c); // shutdown after the queued replies, then close
    void start_reading(const ConnPtr& c);
    static void on_read(uv_stream_t* stream, ssize_t n, const uv_buf_t* buf);
    void process_frames(const ConnPtr& c);
    bool is_output_full(const ConnPtr& c) const; // unsent replies over output-buffer-kib
    void on_written(const ConnPtr& c, int status);

    uv_loop_t* loop_;
    ControlDeps deps_;
    uv_pipe_t listener_{};
    bool listening_ = false, closed_ = false;
    int lock_fd_ = -1;
    std::string socket_path_;
    std::set<ConnPtr> connections_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Dispatch by op (control_handlers.cpp). Returns false for an op this daemon does not know.
bool dispatch_control_op(ControlServer& server, const ControlServer::ConnPtr& c, const proto::Frame& frame);
// artifact-upgrade (control_upgrade.cpp): runs on the I/O worker; ProgressReply frames (kFlagMore),
// then ArtifactUpgradeReply (kFlagEnd) or one error frame. Never touches the served model.
void handle_artifact_upgrade_op(ControlServer& server, const ControlServer::ConnPtr& c, const proto::Frame& frame);

struct ControlConnection {
    uv_pipe_t pipe{};
    ControlServer* server = nullptr;
    proto::FrameDecoder decoder;
    bool is_admin = false;
    uint32_t peer_uid = 0, peer_pid = 0;
    bool closing = false;
    bool peer_done = false;    // the peer shut down its sending side (EOF read)
    bool output_paused = false; // not read while its unsent replies exceed output-buffer-kib
    uint32_t n_in_flight = 0;  // requests whose final reply frame is not sent yet
    uv_timer_t watch_timer{};
    bool watching = false;
    uint32_t watch_left = 0; // frames still to send; 0 = until the client closes
    proto::Frame watch_request;
    std::weak_ptr<ControlConnection> self;
};

} // namespace ninfer::daemon
