// ninfer::daemon - one accepted HTTP connection: llhttp parsing, limits, timer, ordered responses.
//
// Contract (internal to http_server): owned by HttpServer; deletes itself after uv_close of its
// handles finishes. Loop thread only. See http_server.h for the behaviour it implements.
#pragma once

#include "daemon/http_server.h"

#include <llhttp.h>

namespace ninfer::daemon {

class Connection {
  public:
    Connection(HttpServer* server, uv_loop_t* loop);
    uv_tcp_t* tcp() { return &tcp_; }
    void start(); // begin reading
    void close(); // idempotent; writers get on_close, memory freed after the uv callbacks

    // ResponseWriter side.
    void write_raw(std::string data); // now, or gathered while the server is corked
    void write_gathered();            // HttpServer::uncork: the gathered output in one write
    void response_finished(bool keep_alive);
    void start_sse_keepalive(); // ": ping" chunks while the active stream is silent
    size_t write_queue_bytes() const;
    bool is_output_full() const { return write_queue_bytes() > limits().max_output_bytes; }
    // Idle, or still in its headers: what a new connection may push out at max_connections.
    bool is_evictable() const { return !closing_ && !close_after_write_ && !active_ && !(in_request_ && headers_done_); }
    const HttpLimits& limits() const { return server_->limits(); }
    void note_response(int status) const { server_->note_response(status); }

  private:
    static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
    static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
    static void on_timer(uv_timer_t* timer);
    static void on_ping_timer(uv_timer_t* timer);
    static void on_closed(uv_handle_t* handle);

    static int cb_message_begin(llhttp_t* p);
    static int cb_url(llhttp_t* p, const char* at, size_t n);
    static int cb_header_field(llhttp_t* p, const char* at, size_t n);
    static int cb_header_value(llhttp_t* p, const char* at, size_t n);
    static int cb_headers_complete(llhttp_t* p);
    static int cb_body(llhttp_t* p, const char* at, size_t n);
    static int cb_message_complete(llhttp_t* p);

    void pump();            // parse buffered input while no response is active
    void dispatch();        // hand the complete request to the handler
    void fail(int status, std::string message); // error answer, then close
    bool count_header_bytes(size_t n);
    bool hold_body(uint64_t n); // false: 503, the server-wide body budget is spent
    void release_body();
    void arm_timer(uint64_t ms);
    void write_now(std::string data); // one uv_write

    HttpServer* server_;
    uv_tcp_t tcp_{};
    uv_timer_t timer_{};
    uv_timer_t ping_timer_{};
    std::string gathered_;             // output gathered while the server is corked
    uint64_t last_write_ms_ = 0;
    uint64_t last_drain_ms_ = 0;       // the write queue was last empty or made progress
    bool output_paused_ = false;       // input held back for output over max_output_bytes
    llhttp_t parser_{};
    llhttp_settings_t settings_{};
    std::string input_;          // received, not yet parsed
    HttpRequest request_;        // being parsed
    bool request_ready_ = false; // parsed fully, waiting for dispatch
    bool in_request_ = false;    // between message begin and complete
    bool headers_done_ = false;  // in_request_ and its headers complete: the body is arriving
    bool last_was_value_ = false;
    uint32_t header_bytes_ = 0;
    uint64_t body_reserved_ = 0; // body bytes of the current request counted in the server's budget
    int error_status_ = 0;
    std::string error_message_;
    std::shared_ptr<ResponseWriter> active_;
    bool in_pump_ = false;
    bool closing_ = false;
    bool close_after_write_ = false;
    int handles_open_ = 0;
    char read_buffer_[65536];
};

} // namespace ninfer::daemon
