// ninfer::daemon - HTTP/1.1 server on libuv + llhttp: keep-alive, pipelining, chunked bodies,
// header/body limits and timeouts. Loop thread only.
//
// Contract:
// - HttpServer::listen binds host:port (or adopts a socket-activated fd) and calls the handler
//   once per complete request with the request and a ResponseWriter. Requests on one connection
//   are answered strictly in order: the next pipelined request is parsed only after the previous
//   response ended. Input that arrives meanwhile is buffered (bounded), and reading continues so
//   a peer that hangs up mid-response is noticed at once (ResponseWriter::on_close fires).
// - Limits: request line + headers > max_header_bytes or > 100 headers -> 431; a body (by
//   Content-Length or running chunked total) > max_body_bytes -> 413. Deadlines, not idle timers
//   (bytes trickled in do not extend them): headers within header_timeout of the request's first
//   byte, the body within body_timeout of the headers' end, else 408; idle keep-alive connections
//   close after idle_timeout. Parse errors -> 400. Every such error closes the connection after the
//   answer. Lenient llhttp modes stay off.
// - Backpressure: while more than max_output_bytes of a connection's output are unsent, its
//   input is not read and no further pipelined request is parsed (a peer that pipelines and
//   never reads holds at most about that much plus one response); output queued with no write
//   progress for write_timeout closes the connection (a stream's writer sees on_close).
// - Request bodies held at once (arriving, or dispatched until their response ends) are bounded
//   by max_inflight_body_bytes over all connections: a body (by Content-Length, or as chunks
//   arrive) that would pass it gets 503 and the connection closes. Each request costs a few times
//   its body while it is parsed and served, so this bounds that memory too.
// - At max_connections a new connection closes the oldest one that is idle or still in its
//   headers (never one with a body arriving or a response running); only if there is none is the
//   new one refused. Those events are logged at most once per 10 s with a count.
// - memory_peaks(): high-water marks since start, in bytes (loop thread; /metrics reports them):
//   the largest request body received, the most body bytes held at once over all connections,
//   the most unsent response bytes queued on one connection (measured after each write is
//   handed to libuv, so output the kernel took at once does not count).
// - ResponseWriter: send() for a whole response, or start_stream() + write()* + end() for chunked
//   transfer (SSE). Calls after the peer closed are ignored (is_open() says so). For a HEAD
//   request (omit_body) only the status line and headers are written. A
//   text/event-stream response that stays silent for sse_ping_ms gets an SSE comment ": ping", so
//   proxies and clients do not cut a stream waiting on a long prefill.
// - Write batching: between cork() and uncork() (the loop bridge's batch of engine events), each
//   connection's output is gathered and handed to the kernel in one write at uncork(), so a
//   stream given several tokens at once (a speculative round, a loop that fell behind) costs one
//   write, not one per token. Gathered bytes count as unsent output for the limits above.
#pragma once

#include "daemon/daemon_config.h"
#include "daemon/log.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <uv.h>

namespace ninfer::daemon {

struct HttpRequest {
    std::string method;
    std::string path;  // target without the query string
    std::string query; // after '?', undecoded
    std::vector<std::pair<std::string, std::string>> headers; // names lowercased
    std::string body;
    bool keep_alive = true;
    std::string_view header(std::string_view lower_name) const; // "" when absent
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class Connection;

class ResponseWriter {
  public:
    ResponseWriter(Connection* connection, bool keep_alive) : connection_(connection), keep_alive_(keep_alive) {}
    bool is_open() const { return connection_ != nullptr && !ended_; }
    void send(int status, std::string_view content_type, std::string_view body, const HeaderList& extra = {});
    void start_stream(int status, std::string_view content_type, const HeaderList& extra = {});
    void write(std::string_view data); // one chunk
    void end();
    // Called once if the peer disconnects (or the server closes it) before end().
    void on_close(std::function<void()> callback) { on_close_ = std::move(callback); }
    // A header for the response not sent yet (CORS, x-request-id).
    void add_header(std::string name, std::string value) { headers_.emplace_back(std::move(name), std::move(value)); }
    // The request was HEAD: send() and start_stream() write the status and headers GET would get
    // (Content-Length included) and no body; a stream ends right after its headers.
    void omit_body() { omit_body_ = true; }
    size_t write_queue_bytes() const;

    // Internal (Connection): the connection is gone.
    void detach();

  private:
    void finish(); // the response is complete: the connection goes on to the next request
    Connection* connection_;
    bool keep_alive_;
    bool streaming_ = false;
    bool ended_ = false;
    bool omit_body_ = false;
    std::function<void()> on_close_;
    HeaderList headers_;
};

using RequestHandler = std::function<void(HttpRequest&&, std::shared_ptr<ResponseWriter>)>;

// The fields without an initialiser are ninferd options: http_limits_of fills them from the
// option table's values (daemon/options.cpp holds the defaults; a zeroed field admits nothing).
struct HttpLimits {
    uint32_t max_header_bytes{};
    uint32_t max_headers = 100;
    uint64_t max_body_bytes{};
    uint32_t max_connections{};
    uint64_t header_timeout_ms{};
    uint64_t body_timeout_ms{};
    uint64_t max_output_bytes{}; // unsent bytes past which no further request is read or parsed
    uint64_t max_inflight_body_bytes{}; // request bodies held at once, all connections (503 past it)
    uint64_t write_timeout_ms{}; // unsent bytes with no progress this long: the peer is dropped
    uint64_t idle_timeout_ms{};
    uint64_t sse_ping_ms = 10000; // text/event-stream responses silent this long get ": ping" (0 = off)
    HeaderList common_headers; // added to every response (e.g. CORS)
};

HttpLimits http_limits_of(const DaemonConfig& config); // max-header-kib, max-body-mib, ... timeouts

struct HttpMemoryPeaks {
    uint64_t request_body_bytes = 0;      // one request's body
    uint64_t inflight_body_bytes = 0;     // request bodies held at once, all connections
    uint64_t connection_output_bytes = 0; // unsent response bytes queued on one connection
};

class HttpServer {
  public:
    HttpServer(uv_loop_t* loop, HttpLimits limits, RequestHandler handler);
    ~HttpServer();
    // Binds and listens; throws ninfer::Error("http: cannot listen on HOST:PORT: reason").
    void listen(const std::string& host, int port);
    void listen_fd(int fd); // a socket passed by systemd
    int bound_port() const;
    void stop_accepting();
    void close_all(); // closes every connection (their writers see on_close)
    size_t n_connections() const { return connections_.size(); }
    bool has_pending_writes() const; // any response bytes not yet handed to the kernel
    void set_limits(const HttpLimits& limits) { limits_ = limits; } // SIGHUP: new connections
    // Called with the status of every response as its head is sent (whole, streamed, or the
    // server's own 400/408/413/431): the one place responses are counted.
    void on_response(std::function<void(int status)> observer) { on_response_ = std::move(observer); }

    // Writes handed to the kernel's socket queue (uv_write calls) and their bytes, all connections.
    struct WriteFigures {
        uint64_t n_writes = 0;
        uint64_t n_bytes = 0;
    };
    const WriteFigures& write_figures() const { return write_figures_; }

    void cork() { corked_ = true; }
    void uncork(); // writes every connection's gathered output

    // Internal (Connection).
    const HttpLimits& limits() const { return limits_; }
    bool corked() const { return corked_; }
    void gathered(Connection* connection) { gathering_.push_back(connection); } // first bytes while corked
    void note_write(size_t bytes) {
        ++write_figures_.n_writes;
        write_figures_.n_bytes += bytes;
    }
    const RequestHandler& handler() const { return handler_; }
    void forget(Connection* connection);
    // Request body bytes held over all connections; false (nothing added) past the budget.
    bool hold_body_bytes(uint64_t n) {
        if (inflight_body_bytes_ + n > limits_.max_inflight_body_bytes) return false;
        inflight_body_bytes_ += n;
        peaks_.inflight_body_bytes = std::max(peaks_.inflight_body_bytes, inflight_body_bytes_);
        return true;
    }
    void release_body_bytes(uint64_t n) { inflight_body_bytes_ -= std::min(n, inflight_body_bytes_); }
    uint64_t inflight_body_bytes() const { return inflight_body_bytes_; }
    const HttpMemoryPeaks& memory_peaks() const { return peaks_; }
    void note_request_body(uint64_t n) { peaks_.request_body_bytes = std::max(peaks_.request_body_bytes, n); }
    void note_output_queued(uint64_t n) { peaks_.connection_output_bytes = std::max(peaks_.connection_output_bytes, n); }
    void note_response(int status) const {
        if (on_response_) on_response_(status);
    }

  private:
    static void on_connection(uv_stream_t* server, int status);
    uv_loop_t* loop_;
    HttpLimits limits_;
    RequestHandler handler_;
    std::function<void(int)> on_response_;
    uv_tcp_t listener_{};
    bool listening_ = false;
    bool listener_closed_ = false;
    std::vector<Connection*> connections_; // oldest first
    uint64_t inflight_body_bytes_ = 0;
    HttpMemoryPeaks peaks_;
    WriteFigures write_figures_;
    bool corked_ = false;
    std::vector<Connection*> gathering_; // connections with output gathered since cork()
    RepeatedLog refused_log_{10000}, evicted_log_{10000};
};

} // namespace ninfer::daemon
