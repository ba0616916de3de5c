// ninfer::daemon - control socket listener: socket setup, peer credentials, frames, replies.
#include "daemon/control_server.h"

#include "core/util/error.h"
#include "core/util/file_io.h"
#include "daemon/log.h"
#include "proto/messages.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace ninfer::daemon {
namespace {

constexpr const char* kAdminGroup = "ninfer-admin";
// Connections the kernel queues before accept(); ninferctl waits while it is full (proto/client.h).
constexpr int kListenBacklog = 128;

// The socket systemd passed under FileDescriptorName=control, or -1.
int activated_control_fd() {
    char** names = nullptr;
    int n = sd_listen_fds_with_names(0, &names);
    int fd = -1;
    for (int i = 0; i < n; ++i) {
        if (fd < 0 && names && std::string_view(names[i]) == "control" &&
            sd_is_socket_unix(SD_LISTEN_FDS_START + i, SOCK_STREAM, 1, nullptr, 0) > 0)
            fd = SD_LISTEN_FDS_START + i;
        if (names) free(names[i]);
    }
    free(names);
    return fd;
}

bool admin_group_gid(gid_t& gid) {
    group* g = ::getgrnam(kAdminGroup);
    if (!g) return false;
    gid = g->gr_gid;
    return true;
}

// The peer's real groups as they were at connect() (SO_PEERCRED's gid and SO_PEERGROUPS), not
// /etc/group's list for its uid: a process that dropped ninfer-admin is not admin, one given it
// (newgrp, setpriv --groups, a later usermod) is.
bool peer_is_admin(int fd, const ucred& peer) {
    if (peer.uid == 0 || peer.uid == ::geteuid()) return true;
    gid_t admin;
    if (!admin_group_gid(admin)) return false;
    if (peer.gid == admin) return true;
    std::vector<gid_t> groups(64);
    socklen_t len = socklen_t(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) {
        if (errno != ERANGE) return false;
        groups.resize(len / sizeof(gid_t));
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) return false;
    }
    groups.resize(len / sizeof(gid_t));
    return std::find(groups.begin(), groups.end(), admin) != groups.end();
}

// A message that fits one frame: the payload limit is 1 MiB and an error can echo a client's
// value (a slot name) of nearly that size; without the cut the reply would not be sent at all.
std::string error_message_for_frame(const std::string& message) {
    constexpr size_t kMaxErrorMessageBytes = 64 << 10;
    if (message.size() <= kMaxErrorMessageBytes) return message;
    size_t cut = kMaxErrorMessageBytes;
    while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut; // a UTF-8 boundary
    return message.substr(0, cut) + "... (" + std::to_string(message.size() - cut) + " bytes cut)";
}

struct WriteReq {
    uv_write_t req{};
    std::vector<uint8_t> bytes;
    std::shared_ptr<ControlConnection> keep;
};

// `dir` and those of its ancestors that do not exist yet, deepest first.
std::vector<std::string> missing_directories(std::string dir) {
    std::vector<std::string> missing;
    struct stat st;
    while (!dir.empty() && dir != "/" && ::stat(dir.c_str(), &st) != 0 && errno == ENOENT) {
        missing.push_back(dir);
        size_t slash = dir.rfind('/');
        dir = slash == std::string::npos ? "" : dir.substr(0, slash);
    }
    return missing;
}

std::string parent_dir(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos || slash == 0 ? "." : path.substr(0, slash);
}

} // namespace

ControlServer::ControlServer(uv_loop_t* loop, ControlDeps deps)
    : loop_(loop), deps_(std::move(deps)) {}

ControlServer::~ControlServer() {
    *alive_ = false;
    if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string ControlServer::start() {
    uv_pipe_init(loop_, &listener_, 0);
    listener_.data = this;
    int fd = activated_control_fd();
    if (fd >= 0) {
        if (int rc = uv_pipe_open(&listener_, fd); rc != 0) return std::string("control, cannot use the passed socket: ") + uv_strerror(rc);
        socket_path_ = "(socket-activated)";
    } else {
        socket_path_ = deps_.ctx->config.control_socket;
        std::string dir = parent_dir(socket_path_);
        std::vector<std::string> created = missing_directories(dir);
        try {
            core::make_directories(dir, 0750);
        } catch (const Error& e) {
            return std::string("control, ") + e.what();
        }
        std::string lock_path = socket_path_ + ".lock";
        // O_NONBLOCK and the type check: a FIFO or device planted at the lock path is refused.
        lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
        if (lock_fd_ < 0) return "control, cannot open " + lock_path + ": " + std::strerror(errno);
        struct stat lock_st;
        if (::fstat(lock_fd_, &lock_st) != 0 || !S_ISREG(lock_st.st_mode))
            return "control, " + lock_path + " is not a regular file";
        if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
            return "control, another ninferd holds " + socket_path_ + " (lock " + lock_path + ")";
        struct stat st;
        if (::lstat(socket_path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(socket_path_.c_str());
        if (int rc = uv_pipe_bind(&listener_, socket_path_.c_str()); rc != 0)
            return "control, cannot bind " + socket_path_ + ": " + uv_strerror(rc);
        ::chmod(socket_path_.c_str(), 0660);
        gid_t admin;
        if (!admin_group_gid(admin)) {
            log_warning(std::string("control, group ") + kAdminGroup + " does not exist: the socket keeps group " +
                        std::to_string(::getegid()) + "; only root and the daemon's user have admin rights");
        } else {
            // The directories made here (outside systemd's RuntimeDirectory) go to the group too,
            // or its members could not reach the socket through a 0750 root:root directory.
            created.push_back(socket_path_);
            for (const std::string& path : created)
                if (::chown(path.c_str(), uid_t(-1), admin) != 0)
                    log_warning(std::string("control, cannot give ") + path + " to group " + kAdminGroup + ": " +
                                std::strerror(errno));
        }
    }
    if (int rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), kListenBacklog, on_connection); rc != 0)
        return "control, cannot listen on " + socket_path_ + ": " + uv_strerror(rc);
    listening_ = true;
    log_info("control, listening on " + socket_path_);
    return "";
}

void ControlServer::close() {
    if (closed_) return;
    closed_ = true;
    *alive_ = false;
    if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&listener_)))
        uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
    if (listening_ && socket_path_.front() == '/') ::unlink(socket_path_.c_str());
    std::set<ConnPtr> all = connections_;
    for (const ConnPtr& c : all) close_connection(c);
}

void ControlServer::post(std::function<void()> fn) {
    std::weak_ptr<bool> alive = alive_;
    deps_.ctx->bridge->post([alive, fn = std::move(fn)] {
        if (auto a = alive.lock(); a && *a) fn();
    });
}

void ControlServer::on_connection(uv_stream_t* server, int status) {
    if (status == 0) static_cast<ControlServer*>(server->data)->accept_one();
}

void ControlServer::accept_one() {
    auto c = std::make_shared<ControlConnection>();
    c->server = this;
    c->self = c;
    uv_pipe_init(loop_, &c->pipe, 0);
    c->pipe.data = new ConnPtr(c); // released by the close callback
    if (uv_accept(reinterpret_cast<uv_stream_t*>(&listener_), reinterpret_cast<uv_stream_t*>(&c->pipe)) != 0) {
        uv_close(reinterpret_cast<uv_handle_t*>(&c->pipe), [](uv_handle_t* h) { delete static_cast<ConnPtr*>(h->data); });
        return;
    }
    uv_os_fd_t fd;
    uv_fileno(reinterpret_cast<uv_handle_t*>(&c->pipe), &fd);
    ucred peer{};
    socklen_t len = sizeof peer;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 && len == sizeof peer) {
        c->peer_uid = peer.uid;
        c->peer_pid = uint32_t(peer.pid);
        c->is_admin = peer_is_admin(fd, peer);
    }
    connections_.insert(c);
    start_reading(c);
}

void ControlServer::start_reading(const ConnPtr& c) {
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&c->pipe),
        [](uv_handle_t*, size_t, uv_buf_t* buf) {
            static thread_local char scratch[64 * 1024];
            *buf = uv_buf_init(scratch, sizeof scratch);
        },
        on_read);
}

void ControlServer::on_read(uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
    ConnPtr c = *static_cast<ConnPtr*>(stream->data);
    ControlServer* self = c->server;
    if (n == UV_EOF && !c->closing) {
        // A peer that shut down its sending side (SHUT_WR) still gets the replies to
        // what it sent: close once the last of them is written.
        uv_read_stop(stream);
        c->peer_done = true;
        if (c->n_in_flight == 0) self->close_after_writes(c);
        return;
    }
    if (n < 0) return self->close_connection(c);
    c->decoder.feed({reinterpret_cast<const uint8_t*>(buf->base), size_t(n)});
    self->process_frames(c);
}

// The frames decoded so far, while the replies' output stays under the high-water mark.
void ControlServer::process_frames(const ConnPtr& c) {
    while (!c->closing && !is_output_full(c)) {
        std::optional<proto::Frame> f = c->decoder.next();
        if (!f) break;
        on_frame(c, *f);
    }
    if (c->decoder.has_error() && !c->closing && !is_output_full(c)) {
        proto::Frame none;
        bool version = c->decoder.refused_version() != 0;
        reply_error(c, none, version ? proto::Status::BadVersion : proto::Status::BadMessage,
                    "protocol error: " + c->decoder.error());
        close_after_writes(c); // answered once
    }
}

bool ControlServer::is_output_full(const ConnPtr& c) const {
    return uv_stream_get_write_queue_size(reinterpret_cast<const uv_stream_t*>(&c->pipe)) >
           deps_.ctx->config.output_buffer_bytes;
}

// After each reply written: a connection paused for its output reads again once it drained.
void ControlServer::on_written(const ConnPtr& c, int status) {
    if (c->closing) return;
    // The peer is gone (EPIPE, reset): a half-closed or watching connection would never read an
    // EOF, so a failed write is what closes it.
    if (status < 0) return close_connection(c);
    if (!c->output_paused || is_output_full(c)) return;
    c->output_paused = false;
    process_frames(c);
    if (!c->output_paused && !c->peer_done && !c->closing) start_reading(c);
}

void ControlServer::close_after_writes(const ConnPtr& c) {
    if (c->closing) return;
    c->closing = true; // no more replies; the shutdown completes after the queued writes
    auto* req = new uv_shutdown_t;
    req->data = new ConnPtr(c);
    int rc = uv_shutdown(req, reinterpret_cast<uv_stream_t*>(&c->pipe), [](uv_shutdown_t* r, int) {
        ConnPtr conn = *static_cast<ConnPtr*>(r->data);
        delete static_cast<ConnPtr*>(r->data);
        delete r;
        conn->server->close_connection(conn);
    });
    if (rc != 0) {
        delete static_cast<ConnPtr*>(req->data);
        delete req;
        close_connection(c);
    }
}

void ControlServer::on_frame(const ConnPtr& c, const proto::Frame& f) {
    ++c->n_in_flight; // until its final reply frame (reply() counts it down)
    uint16_t op = f.header.op;
    if (f.header.flags != 0) return reply_error(c, f, proto::Status::BadMessage, "requests carry no flags");
    if (op == 0 || op >= proto::kOpCount)
        return reply_error(c, f, proto::Status::UnknownOp, "op " + std::to_string(op) + " is not known to this daemon");
    if (proto::op_is_admin(proto::Op(op)) && !c->is_admin)
        return reply_error(c, f, proto::Status::Refused,
                           std::string(proto::op_name(op)) + " needs admin rights (uid " + std::to_string(c->peer_uid) +
                               " is not root, the daemon's user or a member of " + kAdminGroup + ")");
    if (proto::op_is_admin(proto::Op(op)))
        log_info("ctl, " + std::string(proto::op_name(op)) + " from uid " + std::to_string(c->peer_uid) + " pid " +
                 std::to_string(c->peer_pid));
    try {
        if (!dispatch_control_op(*this, c, f))
            reply_error(c, f, proto::Status::UnknownOp, std::string(proto::op_name(op)) + " is not supported by ninferd");
    } catch (const std::exception& e) {
        reply_error(c, f, error_info(e));
    }
}

void ControlServer::reply(const ConnPtr& c, const proto::Frame& request, proto::Status status,
                          std::vector<uint8_t> payload, uint16_t extra_flags) {
    if (c->closing || closed_ || !connections_.count(c)) return;
    proto::FrameHeader h;
    h.op = request.header.op;
    h.flags = uint16_t(proto::kFlagReply | extra_flags);
    h.status = int32_t(status);
    h.request_id = request.header.request_id;
    auto* w = new WriteReq;
    w->bytes = proto::encode_frame(h, payload);
    if (w->bytes.empty()) { // over the frame limit: say so rather than send nothing
        log_error("ctl, " + std::string(proto::op_name(h.op)) + ": a reply of " + std::to_string(payload.size()) +
                  " bytes exceeds the 1 MiB frame limit");
        h.status = int32_t(proto::Status::Internal);
        h.flags = uint16_t(proto::kFlagReply | (extra_flags & proto::kFlagEnd));
        w->bytes = proto::encode_frame(h, proto::encode_payload(proto::ErrorReply{"the reply exceeds the 1 MiB frame limit"}));
    }
    w->keep = c;
    uv_buf_t buf = uv_buf_init(reinterpret_cast<char*>(w->bytes.data()), unsigned(w->bytes.size()));
    w->req.data = w;
    auto written = [](uv_write_t* r, int status) {
        std::unique_ptr<WriteReq> done(static_cast<WriteReq*>(r->data));
        if (status != UV_ECANCELED && !done->keep->closing) done->keep->server->on_written(done->keep, status);
    };
    if (uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&c->pipe), &buf, 1, written) != 0) {
        delete w;
        return close_connection(c);
    }
    if (is_output_full(c) && !c->output_paused) { // a peer that sends and never reads
        c->output_paused = true;
        uv_read_stop(reinterpret_cast<uv_stream_t*>(&c->pipe));
    }
    bool is_final = !(extra_flags & proto::kFlagMore);
    if (is_final && c->n_in_flight > 0 && --c->n_in_flight == 0 && c->peer_done) close_after_writes(c);
}

proto::Status control_status(Errc kind) {
    switch (kind) {
    case Errc::Invalid: return proto::Status::Invalid;
    case Errc::NotFound: return proto::Status::NotFound;
    case Errc::Busy: return proto::Status::Busy;
    case Errc::Io: return proto::Status::Io;
    case Errc::NoSpace: return proto::Status::NoSpace;
    case Errc::Unavailable: return proto::Status::Busy;
    case Errc::Internal: return proto::Status::Internal;
    }
    return proto::Status::Internal;
}

void ControlServer::reply_error(const ConnPtr& c, const proto::Frame& request, proto::Status status,
                                const std::string& message) {
    reply(c, request, status, proto::encode_payload(proto::ErrorReply{error_message_for_frame(message)}));
}

void ControlServer::reply_error(const ConnPtr& c, const proto::Frame& request, const ErrorInfo& error) {
    // The daemon's own failures (a full disk, an I/O error, a bug) reach the journal as well as
    // the client; a bad argument is the client's business only.
    std::string line = "ctl, " + std::string(proto::op_name(request.header.op)) + " failed: " + error.message;
    if (error.kind == Errc::Internal) log_error(line);
    else if (error.kind == Errc::Io || error.kind == Errc::NoSpace) log_warning(line);
    reply_error(c, request, control_status(error.kind), error.message);
}

void ControlServer::close_connection(const ConnPtr& c) {
    if (!connections_.count(c)) return;
    connections_.erase(c);
    c->closing = true;
    if (c->watching) {
        uv_timer_stop(&c->watch_timer);
        uv_close(reinterpret_cast<uv_handle_t*>(&c->watch_timer),
                 [](uv_handle_t* h) { delete static_cast<ConnPtr*>(h->data); });
        c->watching = false;
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&c->pipe), [](uv_handle_t* h) { delete static_cast<ConnPtr*>(h->data); });
}

} // namespace ninfer::daemon
