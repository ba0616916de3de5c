// ninfer::daemon - HTTP connection: llhttp callbacks, limits, pipelining order, timers, writes.
#include "daemon/http_connection.h"

#include "daemon/api_error.h"
#include "daemon/log.h"

#include <algorithm>
#include <cctype>

namespace ninfer::daemon {
namespace {

struct WriteRequest {
    uv_write_t req;
    std::string data;
    Connection* connection;
};

Connection* self(llhttp_t* p) { return static_cast<Connection*>(p->data); }

// Input buffered while a response is active; beyond this we stop reading until it ends.
constexpr size_t kMaxBufferedInput = 1 << 20;

} // namespace

Connection::Connection(HttpServer* server, uv_loop_t* loop) : server_(server) {
    uv_tcp_init(loop, &tcp_);
    uv_timer_init(loop, &timer_);
    uv_timer_init(loop, &ping_timer_);
    tcp_.data = this;
    timer_.data = this;
    ping_timer_.data = this;
    handles_open_ = 3;
    llhttp_settings_init(&settings_);
    settings_.on_message_begin = cb_message_begin;
    settings_.on_url = cb_url;
    settings_.on_header_field = cb_header_field;
    settings_.on_header_value = cb_header_value;
    settings_.on_headers_complete = cb_headers_complete;
    settings_.on_body = cb_body;
    settings_.on_message_complete = cb_message_complete;
    llhttp_init(&parser_, HTTP_REQUEST, &settings_);
    parser_.data = this;
}

void Connection::start() {
    uv_tcp_nodelay(&tcp_, 1);
    arm_timer(limits().idle_timeout_ms);
    uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), on_alloc, on_read);
}

void Connection::arm_timer(uint64_t ms) {
    uv_timer_stop(&timer_);
    if (ms) uv_timer_start(&timer_, on_timer, ms, 0);
}

void Connection::on_timer(uv_timer_t* timer) {
    auto* c = static_cast<Connection*>(timer->data);
    if (c->active_) return; // a response is running: it has its own lifetime
    if (c->in_request_) {
        bool body = c->headers_done_;
        uint64_t ms = body ? c->limits().body_timeout_ms : c->limits().header_timeout_ms;
        c->fail(408, std::string("request ") + (body ? "body" : "headers") + " not received within " +
                         std::to_string(ms / 1000) + " s");
    } else {
        c->close(); // idle keep-alive connection
    }
}

void Connection::start_sse_keepalive() {
    uint64_t ms = limits().sse_ping_ms;
    if (ms) uv_timer_start(&ping_timer_, on_ping_timer, ms, ms);
}

void Connection::on_ping_timer(uv_timer_t* timer) {
    auto* c = static_cast<Connection*>(timer->data);
    if (!c->active_ || c->closing_) {
        uv_timer_stop(timer);
        return;
    }
    uint64_t now = uv_now(timer->loop);
    if (now - c->last_write_ms_ >= c->limits().sse_ping_ms) c->write_raw("8\r\n: ping\n\n\r\n"); // one chunk
    // A stream whose peer stopped reading and whose output stopped too: the write timeout still holds.
    else if (c->write_queue_bytes() && c->limits().write_timeout_ms && now - c->last_drain_ms_ > c->limits().write_timeout_ms)
        c->close();
}

void Connection::on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
    auto* c = static_cast<Connection*>(handle->data);
    *buf = uv_buf_init(c->read_buffer_, sizeof c->read_buffer_);
}

void Connection::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
    auto* c = static_cast<Connection*>(stream->data);
    if (nread < 0) {
        c->close(); // EOF or error: a peer that hangs up cancels its in-flight response
        return;
    }
    if (nread == 0 || c->closing_ || c->close_after_write_) return;
    c->input_.append(buf->base, size_t(nread));
    if ((c->active_ || c->is_output_full()) && c->input_.size() > kMaxBufferedInput) uv_read_stop(stream);
    c->pump();
}

void Connection::pump() {
    if (in_pump_) return; // the outer pump loop continues
    in_pump_ = true;
    while (!closing_ && !close_after_write_ && !active_ && !input_.empty() && !is_output_full()) {
        llhttp_errno_t err = llhttp_execute(&parser_, input_.data(), input_.size());
        if (err == HPE_OK) {
            input_.clear();
            break;
        }
        if (err == HPE_PAUSED) {
            size_t consumed = size_t(llhttp_get_error_pos(&parser_) - input_.data());
            input_.erase(0, consumed);
            llhttp_resume(&parser_);
            dispatch();
            continue;
        }
        if (error_status_) {
            fail(error_status_, error_message_);
        } else {
            fail(400, std::string("malformed HTTP request: ") + llhttp_get_error_reason(&parser_));
        }
        break;
    }
    in_pump_ = false;
    // Reading resumes when the output drains (the write callback pumps again).
    if (!closing_ && !active_ && !close_after_write_ && !is_output_full())
        uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), on_alloc, on_read);
    else if (is_output_full() && !closing_) {
        output_paused_ = true;
        uv_read_stop(reinterpret_cast<uv_stream_t*>(&tcp_));
    }
}

void Connection::dispatch() {
    request_ready_ = false;
    in_request_ = false;
    uv_timer_stop(&timer_);
    active_ = std::make_shared<ResponseWriter>(this, request_.keep_alive);
    auto writer = active_;
    try {
        server_->handler()(std::move(request_), writer);
    } catch (const std::exception& e) {
        // Handlers contain their errors; this is the last line of defence against a bug.
        log_error(std::string("http, request handler threw: ") + e.what());
        if (writer->is_open()) fail(500, "internal error");
    }
    request_ = HttpRequest{};
}

void Connection::fail(int status, std::string message) {
    ApiError e{status, std::move(message), "", "", ""};
    if (status == 413) e.code = "request_too_large";
    std::string body = render_openai_error(e);
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + std::string(status_reason(status)) +
                       "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\nConnection: close\r\n\r\n";
    in_request_ = false;
    note_response(status);
    write_raw(head + body);
    close_after_write_ = true;
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&tcp_));
}

void Connection::write_raw(std::string data) {
    if (closing_) return;
    last_write_ms_ = uv_now(tcp_.loop);
    if (write_queue_bytes() == 0) {
        last_drain_ms_ = last_write_ms_;
    } else if (limits().write_timeout_ms && last_write_ms_ - last_drain_ms_ > limits().write_timeout_ms) {
        log_debug("http, closing a connection that read none of its output for " +
                  std::to_string(limits().write_timeout_ms / 1000) + " s");
        return close(); // the peer stopped reading: its stream is cancelled through on_close
    }
    if (server_->corked()) {
        if (gathered_.empty()) server_->gathered(this);
        gathered_ += data;
        return;
    }
    write_now(std::move(data));
}

void Connection::write_gathered() {
    if (closing_ || gathered_.empty()) return;
    std::string data;
    data.swap(gathered_);
    write_now(std::move(data));
}

void Connection::write_now(std::string data) {
    server_->note_write(data.size());
    auto* w = new WriteRequest{{}, std::move(data), this};
    uv_buf_t buf = uv_buf_init(w->data.data(), unsigned(w->data.size()));
    int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&tcp_), &buf, 1, [](uv_write_t* req, int status) {
        auto* w = reinterpret_cast<WriteRequest*>(req);
        Connection* c = w->connection;
        delete w;
        if (status >= 0) c->last_drain_ms_ = uv_now(c->tcp_.loop); // the peer is reading
        if (status < 0) {
            c->close();
        } else if (c->output_paused_ && !c->is_output_full() && !c->closing_) {
            c->output_paused_ = false;
            c->pump(); // parse the next pipelined request and read again
        } else if (c->close_after_write_ && c->write_queue_bytes() == 0 &&
                   uv_stream_get_write_queue_size(reinterpret_cast<uv_stream_t*>(&c->tcp_)) == 0) {
            c->close();
        }
    });
    if (rc < 0) {
        delete w;
        return close();
    }
    server_->note_output_queued(write_queue_bytes());
}

size_t Connection::write_queue_bytes() const {
    return gathered_.size() + uv_stream_get_write_queue_size(reinterpret_cast<const uv_stream_t*>(&tcp_));
}

void Connection::response_finished(bool keep_alive) {
    active_.reset();
    release_body(); // the dispatched request's body is no longer held
    uv_timer_stop(&ping_timer_);
    if (!keep_alive) {
        close_after_write_ = true;
        uv_read_stop(reinterpret_cast<uv_stream_t*>(&tcp_));
        if (write_queue_bytes() == 0) close();
        return;
    }
    arm_timer(limits().idle_timeout_ms);
    pump();
}

void Connection::close() {
    if (closing_) return;
    closing_ = true;
    release_body();
    if (active_) {
        auto writer = std::move(active_);
        writer->detach();
    }
    server_->forget(this);
    uv_timer_stop(&timer_);
    uv_timer_stop(&ping_timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), on_closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&ping_timer_), on_closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), on_closed);
}

void Connection::on_closed(uv_handle_t* handle) {
    auto* c = static_cast<Connection*>(handle->data);
    if (--c->handles_open_ == 0) delete c;
}

bool Connection::hold_body(uint64_t n) {
    if (server_->hold_body_bytes(n)) return true;
    error_status_ = 503;
    error_message_ = "the server holds " + std::to_string(server_->inflight_body_bytes()) +
                     " bytes of request bodies, its limit: try again later";
    return false;
}

void Connection::release_body() {
    server_->release_body_bytes(body_reserved_);
    body_reserved_ = 0;
}

bool Connection::count_header_bytes(size_t n) {
    header_bytes_ += uint32_t(n);
    if (header_bytes_ <= limits().max_header_bytes) return true;
    error_status_ = 431;
    error_message_ = "request line and headers exceed " + std::to_string(limits().max_header_bytes) + " bytes";
    return false;
}

int Connection::cb_message_begin(llhttp_t* p) {
    Connection* c = self(p);
    c->request_ = HttpRequest{};
    c->header_bytes_ = 0;
    c->last_was_value_ = false;
    c->in_request_ = true;
    c->headers_done_ = false;
    c->release_body(); // a request that failed before dispatch
    c->arm_timer(c->limits().header_timeout_ms); // the headers' deadline, from the first byte
    return 0;
}

int Connection::cb_url(llhttp_t* p, const char* at, size_t n) {
    Connection* c = self(p);
    if (!c->count_header_bytes(n)) return -1;
    c->request_.path.append(at, n);
    return 0;
}

int Connection::cb_header_field(llhttp_t* p, const char* at, size_t n) {
    Connection* c = self(p);
    if (!c->count_header_bytes(n)) return -1;
    auto& headers = c->request_.headers;
    if (headers.empty() || c->last_was_value_) {
        if (headers.size() >= c->limits().max_headers) {
            c->error_status_ = 431;
            c->error_message_ = "more than " + std::to_string(c->limits().max_headers) + " headers";
            return -1;
        }
        headers.emplace_back();
    }
    for (size_t i = 0; i < n; ++i) headers.back().first += char(std::tolower(static_cast<unsigned char>(at[i])));
    c->last_was_value_ = false;
    return 0;
}

int Connection::cb_header_value(llhttp_t* p, const char* at, size_t n) {
    Connection* c = self(p);
    if (!c->count_header_bytes(n)) return -1;
    if (c->request_.headers.empty()) return -1;
    c->request_.headers.back().second.append(at, n);
    c->last_was_value_ = true;
    return 0;
}

int Connection::cb_headers_complete(llhttp_t* p) {
    Connection* c = self(p);
    HttpRequest& r = c->request_;
    r.method = llhttp_method_name(llhttp_method_t(p->method));
    size_t q = r.path.find('?');
    if (q != std::string::npos) {
        r.query = r.path.substr(q + 1);
        r.path.resize(q);
    }
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->limits().max_body_bytes) {
        c->error_status_ = 413;
        c->error_message_ = "request body of " + std::to_string(p->content_length) + " bytes exceeds the limit of " +
                            std::to_string(c->limits().max_body_bytes) + " bytes";
        return -1;
    }
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0) { // reserve the announced body now
        if (!c->hold_body(p->content_length)) return -1;
        c->body_reserved_ = p->content_length;
    }
    if (r.header("expect") == "100-continue") c->write_raw("HTTP/1.1 100 Continue\r\n\r\n");
    c->headers_done_ = true;
    c->arm_timer(c->limits().body_timeout_ms); // the body's deadline, from now
    return 0;
}

int Connection::cb_body(llhttp_t* p, const char* at, size_t n) {
    Connection* c = self(p);
    if (c->request_.body.size() + n > c->limits().max_body_bytes) {
        c->error_status_ = 413;
        c->error_message_ = "request body exceeds the limit of " + std::to_string(c->limits().max_body_bytes) + " bytes";
        return -1;
    }
    if (c->request_.body.size() + n > c->body_reserved_) { // chunked: hold the bytes as they come
        if (!c->hold_body(c->request_.body.size() + n - c->body_reserved_)) return -1;
        c->body_reserved_ = c->request_.body.size() + n;
    }
    c->request_.body.append(at, n);
    return 0;
}

int Connection::cb_message_complete(llhttp_t* p) {
    Connection* c = self(p);
    c->request_.keep_alive = llhttp_should_keep_alive(p);
    c->server_->note_request_body(c->request_.body.size());
    c->request_ready_ = true;
    return HPE_PAUSED; // dispatch after llhttp_execute returns; the next request waits its turn
}

} // namespace ninfer::daemon
