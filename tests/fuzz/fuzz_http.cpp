// ninfer fuzz - the HTTP request path: the input is written on a fresh loopback connection to a
// real HttpServer (llhttp, limits, pipelining, chunked bodies) whose handler is ninferd's route
// dispatch (daemon/routes.h: CORS, API-key check, route and method matching, error rendering)
// over a DaemonContext still loading its model, then the client half-closes and reads until the
// server closes. Every request the server parses is answered; a crash, sanitizer report, a 5xx
// other than the loading 503, or a connection the server never closes (libFuzzer's -timeout) is
// a bug.
#include "core/engine/engine.h"
#include "daemon/config_load.h"
#include "daemon/daemon_context.h"
#include "daemon/routes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace ninfer;
using namespace ninfer::daemon;

namespace {

struct Harness {
    uv_loop_t loop{};
    core::Engine engine{core::SchedulerOptions{}}; // never started: the daemon is "loading"
    DaemonContext ctx;
    std::unique_ptr<HttpServer> server;
    int port = 0;
    uint32_t n_connections = 0;

    Harness() {
        uv_loop_init(&loop);
        Settings settings;
        settings.set("artifact", "/nonexistent/m.ninfer", "fuzz");
        settings.set("api-key", "fuzz-key", "fuzz");
        settings.set("cors-origins", "http://allowed.example", "fuzz");
        settings.set("max-body-mib", "1", "fuzz");
        ctx.config = to_daemon_config(settings);
        ctx.settings = settings;
        ctx.loop = &loop;
        ctx.engine = &engine;
        ctx.state = ServeState::Loading;
        HttpLimits limits = http_limits_of(ctx.config);
        server = std::make_unique<HttpServer>(&loop, limits, [this](HttpRequest&& r, std::shared_ptr<ResponseWriter> w) {
            dispatch(ctx, r, std::move(w));
        });
        server->on_response([](int status) {
            if (status >= 500 && status != 503) {
                std::fprintf(stderr, "fuzz_http: a request was answered %d\n", status);
                std::abort();
            }
        });
        server->listen("127.0.0.1", 0);
        port = server->bound_port();
    }

    // Each connection ends in TIME_WAIT on the client side (it half-closes first) for a minute:
    // at a thousand inputs a second one source address would run out of ports, so the client
    // binds a new address of 127.0.0.0/8 each time (all loopback).
    int connect_client() {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in from{};
        from.sin_family = AF_INET;
        from.sin_addr.s_addr = htonl(0x7F000000u + 2 + (n_connections++ % 0xFFFF00u));
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(uint16_t(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int rc = fd < 0 ? -1 : ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from);
        if (rc == 0) rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        if (rc != 0 && errno == EINTR) { // libFuzzer's timer signal: the connect goes on; wait for it
            pollfd p{fd, POLLOUT, 0};
            while (::poll(&p, 1, 1000) < 0 && errno == EINTR) {}
            int err = 0;
            socklen_t n = sizeof err;
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n);
            rc = err ? -1 : 0;
            errno = err;
        }
        if (rc != 0) {
            std::fprintf(stderr, "fuzz_http: harness cannot connect: %s\n", std::strerror(errno));
            abort();
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        return fd;
    }

    // Writes the input while the loop runs, half-closes, reads until the server closes, then
    // lets the loop finish the connection's close callbacks.
    void exchange(const uint8_t* data, size_t n) {
        int fd = connect_client();
        size_t sent = 0;
        bool half_closed = false, server_closed = false;
        char sink[65536];
        while (!server_closed) {
            if (sent < n) {
                ssize_t w = ::send(fd, data + sent, n - sent, MSG_NOSIGNAL);
                if (w > 0) sent += size_t(w);
                else if (errno != EAGAIN && errno != EINTR) server_closed = true; // closed early (an error answer)
            } else if (!half_closed) {
                ::shutdown(fd, SHUT_WR);
                half_closed = true;
            }
            uv_run(&loop, UV_RUN_NOWAIT);
            ssize_t r = ::recv(fd, sink, sizeof sink, 0);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) server_closed = true;
        }
        ::close(fd);
        while (server->n_connections() > 0) uv_run(&loop, UV_RUN_NOWAIT);
    }
};

Harness* g_harness;

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    log_init(LogLevel::Error); // refused-connection and parse-error lines would flood stderr
    g_harness = new Harness(); // never destroyed: libFuzzer exits without unwinding
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    g_harness->exchange(data, size);
    return 0;
}
