// ninfer::daemon - HTTP listener and ResponseWriter (whole and chunked responses).
#include "daemon/http_server.h"

#include "core/util/error.h"
#include "daemon/api_error.h"
#include "daemon/http_connection.h"
#include "daemon/log.h"

#include <algorithm>
#include <cstdio>

namespace ninfer::daemon {
namespace {

std::string status_line_and_headers(int status, std::string_view content_type, const HeaderList& extra,
                                    const HeaderList& common, const HeaderList& added) {
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + std::string(status_reason(status)) + "\r\n";
    if (!content_type.empty()) head += "Content-Type: " + std::string(content_type) + "\r\n";
    for (const auto& [name, value] : common) head += name + ": " + value + "\r\n";
    for (const auto& [name, value] : extra) head += name + ": " + value + "\r\n";
    for (const auto& [name, value] : added) head += name + ": " + value + "\r\n";
    return head;
}

} // namespace

std::string_view HttpRequest::header(std::string_view lower_name) const {
    for (const auto& [name, value] : headers)
        if (name == lower_name) return value;
    return {};
}

void ResponseWriter::send(int status, std::string_view content_type, std::string_view body, const HeaderList& extra) {
    if (!is_open() || streaming_) return;
    std::string out = status_line_and_headers(status, content_type, extra, connection_->limits().common_headers, headers_);
    if (!keep_alive_) out += "Connection: close\r\n";
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    if (!omit_body_) out += body;
    connection_->note_response(status);
    connection_->write_raw(std::move(out));
    finish();
}

void ResponseWriter::finish() {
    ended_ = true;
    Connection* c = connection_;
    connection_ = nullptr;
    c->response_finished(keep_alive_);
}

void ResponseWriter::start_stream(int status, std::string_view content_type, const HeaderList& extra) {
    if (!is_open() || streaming_) return;
    std::string out = status_line_and_headers(status, content_type, extra, connection_->limits().common_headers, headers_);
    if (!keep_alive_) out += "Connection: close\r\n";
    out += "Transfer-Encoding: chunked\r\n\r\n";
    connection_->note_response(status);
    connection_->write_raw(std::move(out));
    if (omit_body_) return finish();
    streaming_ = true;
    if (content_type.rfind("text/event-stream", 0) == 0) connection_->start_sse_keepalive();
}

void ResponseWriter::write(std::string_view data) {
    if (!is_open() || !streaming_ || data.empty()) return;
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string out = size;
    out.append(data);
    out += "\r\n";
    connection_->write_raw(std::move(out));
}

void ResponseWriter::end() {
    if (!is_open()) return;
    if (streaming_) connection_->write_raw("0\r\n\r\n");
    finish();
}

size_t ResponseWriter::write_queue_bytes() const { return connection_ ? connection_->write_queue_bytes() : 0; }

void ResponseWriter::detach() {
    if (!connection_) return;
    connection_ = nullptr;
    if (!ended_ && on_close_) {
        auto callback = std::move(on_close_);
        callback();
    }
}

HttpLimits http_limits_of(const DaemonConfig& c) {
    HttpLimits l;
    l.max_header_bytes = c.max_header_bytes;
    l.max_body_bytes = c.max_body_bytes;
    l.max_connections = c.max_connections;
    l.header_timeout_ms = uint64_t(c.header_timeout_s) * 1000;
    l.body_timeout_ms = uint64_t(c.body_timeout_s) * 1000;
    l.max_output_bytes = c.output_buffer_bytes;
    l.max_inflight_body_bytes = c.max_inflight_body_bytes;
    l.write_timeout_ms = uint64_t(c.write_timeout_s) * 1000;
    l.idle_timeout_ms = uint64_t(c.idle_timeout_s) * 1000;
    return l;
}

HttpServer::HttpServer(uv_loop_t* loop, HttpLimits limits, RequestHandler handler)
    : loop_(loop), limits_(std::move(limits)), handler_(std::move(handler)) {
    uv_tcp_init(loop_, &listener_);
    listener_.data = this;
}

HttpServer::~HttpServer() {
    close_all();
    if (!listener_closed_) {
        listener_closed_ = true;
        uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
    }
}

void HttpServer::listen(const std::string& host, int port) {
    sockaddr_storage addr{};
    int rc = host.find(':') != std::string::npos
                 ? uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&addr))
                 : uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&addr));
    if (rc == 0) rc = uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&addr), 0);
    if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 511, on_connection);
    if (rc != 0)
        throw Error("http: cannot listen on " + host + ":" + std::to_string(port) + ": " + uv_strerror(rc));
    listening_ = true;
}

void HttpServer::listen_fd(int fd) {
    int rc = uv_tcp_open(&listener_, fd);
    if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 511, on_connection);
    if (rc != 0) throw Error(std::string("http: cannot listen on the socket systemd passed: ") + uv_strerror(rc));
    listening_ = true;
}

int HttpServer::bound_port() const {
    sockaddr_storage addr{};
    int len = sizeof addr;
    if (uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
    if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

void HttpServer::on_connection(uv_stream_t* listener, int status) {
    auto* server = static_cast<HttpServer*>(listener->data);
    if (status < 0) return;
    auto* c = new Connection(server, server->loop_);
    if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(c->tcp())) != 0) {
        server->connections_.push_back(c);
        c->close();
        return;
    }
    server->connections_.push_back(c);
    if (server->connections_.size() > server->limits_.max_connections) {
        // Slow or idle peers must not lock everyone out: the oldest of them makes room.
        auto victim = std::find_if(server->connections_.begin(), server->connections_.end() - 1,
                                   [](const Connection* old) { return old->is_evictable(); });
        uint64_t now = uv_now(server->loop_);
        std::string limit = std::to_string(server->limits_.max_connections);
        if (victim == server->connections_.end() - 1) {
            server->refused_log_.warning(now, "http, connection refused: " + limit + " open, none idle");
            c->close();
            return;
        }
        server->evicted_log_.warning(now, "http, " + limit + " connections open: closed the oldest idle one");
        (*victim)->close();
    }
    c->start();
}

void HttpServer::stop_accepting() {
    if (listener_closed_) return;
    listening_ = false;
    listener_closed_ = true;
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
}

void HttpServer::close_all() {
    std::vector<Connection*> all = connections_;
    for (Connection* c : all) c->close();
}

bool HttpServer::has_pending_writes() const {
    for (const Connection* c : connections_)
        if (c->write_queue_bytes() > 0) return true;
    return false;
}

void HttpServer::forget(Connection* connection) {
    connections_.erase(std::remove(connections_.begin(), connections_.end(), connection), connections_.end());
    gathering_.erase(std::remove(gathering_.begin(), gathering_.end(), connection), gathering_.end());
}

void HttpServer::uncork() {
    corked_ = false;
    std::vector<Connection*> ready;
    ready.swap(gathering_);
    for (Connection* c : ready) c->write_gathered(); // may close c: forget() no longer finds it in gathering_
}

} // namespace ninfer::daemon
