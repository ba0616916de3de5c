// ninfer tests - a real-socket harness for HttpServer: the server runs on the calling thread's
// loop while a client runs on another thread (http_server.cpp, http_cork.cpp).
//
// Contract: Harness(limits) listens on 127.0.0.1 (an ephemeral port); handle() answers the
// built-in paths below, or `custom` first when set (it returns true when it answered); run(client)
// and exchange(request, n, marker) run the loop until the client thread is done. Test-only.
#pragma once

#include "daemon/config_load.h"
#include "daemon/http_server.h"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <thread>

namespace ninfer::daemon::test {


// ninferd's defaults, from the option table (the limits a test does not set).
inline HttpLimits default_limits() {
    Settings settings;
    settings.set("artifact", "/m.ninfer", "test");
    return http_limits_of(to_daemon_config(settings));
}

// Runs a server on the calling thread's loop while `client` runs on another thread.
struct Harness {
    uv_loop_t loop{};
    uv_async_t stop{};
    std::unique_ptr<HttpServer> server;
    int port = 0;
    std::atomic<int> closed_callbacks{0};
    std::atomic<int> n_handled{0};
    std::map<int, int> responses_by_status; // from HttpServer::on_response (loop thread)
    HttpMemoryPeaks final_peaks;            // the server's, read as the loop stops

    explicit Harness(HttpLimits limits) {
        uv_loop_init(&loop);
        uv_async_init(&loop, &stop, [](uv_async_t* a) {
            auto* h = static_cast<Harness*>(a->data);
            h->final_peaks = h->server->memory_peaks();
            h->server.reset();
            uv_close(reinterpret_cast<uv_handle_t*>(&h->stop), nullptr);
        });
        stop.data = this;
        server = std::make_unique<HttpServer>(&loop, limits, [this](HttpRequest&& r, std::shared_ptr<ResponseWriter> w) {
            handle(std::move(r), std::move(w));
        });
        server->on_response([this](int status) { ++responses_by_status[status]; });
        server->listen("127.0.0.1", 0);
        port = server->bound_port();
    }

    std::function<bool(HttpRequest&, std::shared_ptr<ResponseWriter>)> custom;

    void handle(HttpRequest&& r, std::shared_ptr<ResponseWriter> w) {
        if (custom && custom(r, w)) return;
        std::string body = r.method + " " + r.path + " " + std::to_string(r.body.size());
        if (r.path == "/slow") { // answer later: a pipelined request behind it must wait
            auto* timer = new uv_timer_t;
            uv_timer_init(&loop, timer);
            timer->data = new std::pair<std::shared_ptr<ResponseWriter>, std::string>(w, body);
            uv_timer_start(timer, [](uv_timer_t* t) {
                auto* p = static_cast<std::pair<std::shared_ptr<ResponseWriter>, std::string>*>(t->data);
                p->first->send(200, "text/plain", p->second);
                delete p;
                uv_close(reinterpret_cast<uv_handle_t*>(t), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
            }, 50, 0);
            return;
        }
        ++n_handled;
        if (r.path == "/big") return w->send(200, "text/plain", std::string(64 << 10, 'b'));
        if (r.path == "/flood") { // a stream producing 256 KiB every 20 ms until the peer is gone
            w->on_close([this] { ++closed_callbacks; });
            w->start_stream(200, "text/event-stream");
            auto* timer = new uv_timer_t;
            uv_timer_init(&loop, timer);
            timer->data = new std::shared_ptr<ResponseWriter>(w);
            uv_timer_start(timer, [](uv_timer_t* t) {
                auto* writer = static_cast<std::shared_ptr<ResponseWriter>*>(t->data);
                if ((*writer)->is_open()) return (*writer)->write(std::string(256 << 10, 'f'));
                delete writer;
                uv_close(reinterpret_cast<uv_handle_t*>(t), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
            }, 20, 20);
            return;
        }
        if (r.path == "/stream") {
            w->on_close([this] { ++closed_callbacks; });
            w->start_stream(200, "text/event-stream");
            w->write("data: 1\n\n");
            return; // never ends: the client hangs up
        }
        w->send(200, "text/plain", body);
    }

    // A client socket connected to the server, reads timing out after 2 s.
    int connect_client() const {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(uint16_t(port));
        inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
        REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        timeval tv{2, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        return fd;
    }

    // Runs the server loop until `client` (on another thread) returns.
    void run(const std::function<void()>& client) {
        std::thread t([&] {
            client();
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            uv_async_send(&stop);
        });
        uv_run(&loop, UV_RUN_DEFAULT);
        t.join();
    }

    std::string exchange(const std::string& request, size_t expect_substrings, const std::string& marker) {
        std::string got;
        std::thread client([&] {
            int fd = connect_client();
            send(fd, request.data(), request.size(), 0);
            char buf[4096];
            auto count = [&] {
                size_t n = 0;
                for (size_t p = got.find(marker); p != std::string::npos; p = got.find(marker, p + 1)) ++n;
                return n;
            };
            while (count() < expect_substrings) {
                ssize_t n = recv(fd, buf, sizeof buf, 0);
                if (n <= 0) break;
                got.append(buf, size_t(n));
            }
            ::close(fd);
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            uv_async_send(&stop);
        });
        uv_run(&loop, UV_RUN_DEFAULT);
        client.join();
        return got;
    }
    ~Harness() { uv_loop_close(&loop); }
};


} // namespace ninfer::daemon::test
