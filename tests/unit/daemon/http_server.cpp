// ninfer tests - HTTP server over a real socket: keep-alive, pipelining order, chunked bodies,
// limits (431, 413), malformed input (400), Expect: 100-continue, disconnect notification, response counting.
#include "tests/unit/daemon/http_harness.h"

using namespace ninfer::daemon;
using namespace ninfer::daemon::test;

TEST_CASE("keep-alive pipelined requests are answered in order, chunked bodies reassembled", "[http_server]") {
    Harness h(default_limits());
    std::string req = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
                      "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
                      "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nwxyz";
    std::string got = h.exchange(req, 3, "HTTP/1.1 200");
    size_t a = got.find("GET /slow 0"), b = got.find("POST /b 5"), c = got.find("POST /c 4");
    REQUIRE(a != std::string::npos);
    REQUIRE(b != std::string::npos);
    REQUIRE(c != std::string::npos);
    CHECK(a < b);
    CHECK(b < c);
}

TEST_CASE("oversized headers get 431, oversized bodies 413, garbage 400, and the connection closes", "[http_server]") {
    HttpLimits limits = default_limits();
    limits.max_header_bytes = 256;
    limits.max_body_bytes = 10;
    {
        Harness h(limits);
        std::string got = h.exchange("GET / HTTP/1.1\r\nX-Big: " + std::string(400, 'a') + "\r\n\r\n", 1, "HTTP/1.1");
        CHECK(got.find("HTTP/1.1 431") == 0);
        CHECK(got.find("Connection: close") != std::string::npos);
    }
    {
        Harness h(limits);
        std::string got = h.exchange("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n01234567890", 1, "HTTP/1.1");
        CHECK(got.find("HTTP/1.1 413") == 0);
        CHECK(got.find("request_too_large") != std::string::npos);
    }
    {
        Harness h(limits);
        std::string got = h.exchange("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n8\r\n01234567\r\n0\r\n\r\n",
                                     1, "HTTP/1.1");
        CHECK(got.find("HTTP/1.1 413") == 0);
    }
    {
        Harness h(limits);
        std::string got = h.exchange("NOT HTTP AT ALL\r\n\r\n", 1, "HTTP/1.1");
        CHECK(got.find("HTTP/1.1 400") == 0);
        CHECK(got.find("\"error\"") != std::string::npos);
    }
    {
        Harness h(limits); // request smuggling shape: both Content-Length and chunked
        std::string got = h.exchange(
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 1, "HTTP/1.1");
        CHECK(got.find("HTTP/1.1 400") == 0);
    }
}

TEST_CASE("Expect: 100-continue gets an interim answer; HTTP/1.0 closes after the response", "[http_server]") {
    Harness h(default_limits());
    std::string got = h.exchange("POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok", 2, "HTTP/1.1 ");
    CHECK(got.find("HTTP/1.1 100 Continue") == 0);
    CHECK(got.find("POST /e 2") != std::string::npos);
    Harness h10(default_limits());
    std::string got10 = h10.exchange("GET /old HTTP/1.0\r\n\r\n", 1, "GET /old 0");
    CHECK(got10.find("Connection: close") != std::string::npos);
}

TEST_CASE("a silent event stream gets ': ping' comments", "[http_server]") {
    HttpLimits limits = default_limits();
    limits.sse_ping_ms = 50;
    Harness h(limits);
    std::string got = h.exchange("GET /stream HTTP/1.1\r\n\r\n", 2, ": ping\n\n");
    CHECK(got.find("data: 1\n\n") < got.find("8\r\n: ping\n\n\r\n"));
}

TEST_CASE("a peer that hangs up mid-stream fires the writer's on_close", "[http_server]") {
    Harness h(default_limits());
    std::string got = h.exchange("GET /stream HTTP/1.1\r\n\r\n", 1, "data: 1");
    CHECK(got.find("Transfer-Encoding: chunked") != std::string::npos);
    CHECK(h.closed_callbacks == 1);
}

TEST_CASE("headers that do not arrive within the header timeout get 408; idle keep-alive closes", "[http_server]") {
    HttpLimits limits = default_limits();
    limits.header_timeout_ms = 150;
    limits.idle_timeout_ms = 150;
    Harness slow(limits);
    std::string got = slow.exchange("GET / HTTP/1.1\r\nHost: x\r\n", 1, "HTTP/1.1");
    CHECK(got.find("HTTP/1.1 408") == 0);
    Harness idle(limits);
    // One answered request, then silence: the server closes (recv sees EOF before the 2 s timeout).
    auto t0 = std::chrono::steady_clock::now();
    std::string answered = idle.exchange("GET /a HTTP/1.1\r\n\r\n", 2, "HTTP/1.1");
    CHECK(answered.find("GET /a 0") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1500));
}

TEST_CASE("every response is counted once by status where it is sent: whole, streamed, the server's own",
          "[http_server]") {
    {
        Harness h(default_limits());
        h.exchange("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n", 2, "HTTP/1.1 200");
        CHECK(h.responses_by_status == std::map<int, int>{{200, 2}});
    }
    {
        Harness h(default_limits());
        h.exchange("GET /stream HTTP/1.1\r\n\r\n", 1, "data: 1");
        CHECK(h.responses_by_status == std::map<int, int>{{200, 1}}); // the head, not each chunk
    }
    {
        HttpLimits limits = default_limits();
        limits.max_header_bytes = 256;
        Harness h(limits);
        h.exchange("GET / HTTP/1.1\r\nX-Big: " + std::string(400, 'a') + "\r\n\r\n", 1, "HTTP/1.1");
        CHECK(h.responses_by_status == std::map<int, int>{{431, 1}});
    }
}

namespace {

// Sends `head`, then `trickle` one byte every 50 ms, stopping early once the server answers.
// Returns the answer and whether it came before the trickle ended.
std::pair<std::string, bool> trickle(Harness& h, const std::string& head, const std::string& trickle) {
    std::string got;
    bool early = false;
    h.run([&] {
        int fd = h.connect_client();
        send(fd, head.data(), head.size(), 0);
        char buf[4096];
        for (char c : trickle) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            if (recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK) > 0) {
                early = true;
                break;
            }
            send(fd, &c, 1, MSG_NOSIGNAL);
        }
        for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, size_t(n));
        ::close(fd);
    });
    return {got, early};
}

} // namespace

TEST_CASE("the header and body timeouts are deadlines: trickled bytes do not extend them", "[http_server]") {
    HttpLimits limits = default_limits();
    limits.header_timeout_ms = 300;
    limits.body_timeout_ms = 300;
    {
        Harness h(limits);
        auto [got, early] = trickle(h, "GET / HTTP/1.1\r\n", std::string(60, 'x')); // 3 s of header bytes
        CHECK(early);
        CHECK(got.find("HTTP/1.1 408") == 0);
        CHECK(got.find("request headers not received") != std::string::npos);
    }
    {
        Harness h(limits);
        auto [got, early] = trickle(h, "POST / HTTP/1.1\r\nContent-Length: 60\r\n\r\n", std::string(60, 'x'));
        CHECK(early);
        CHECK(got.find("HTTP/1.1 408") == 0);
        CHECK(got.find("request body not received") != std::string::npos);
    }
}

TEST_CASE("at the connection limit the oldest idle or header-stage connection makes room", "[http_server]") {
    HttpLimits limits = default_limits();
    limits.max_connections = 2;
    Harness h(limits);
    std::string idle_got, partial_got, answer;
    h.run([&] {
        int idle = h.connect_client(); // oldest, sends nothing
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        int partial = h.connect_client(); // still in its headers
        send(partial, "GET / HT", 8, 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        int fresh = h.connect_client();
        send(fresh, "GET /c HTTP/1.1\r\n\r\n", 19, 0);
        char buf[4096];
        ssize_t n = recv(fresh, buf, sizeof buf, 0);
        if (n > 0) answer.assign(buf, size_t(n));
        n = recv(idle, buf, sizeof buf, 0); // 0: closed by the server
        idle_got = n == 0 ? "closed" : "open";
        n = recv(partial, buf, sizeof buf, MSG_DONTWAIT);
        partial_got = n == 0 ? "closed" : "open";
        for (int fd : {idle, partial, fresh}) ::close(fd);
    });
    CHECK(answer.find("HTTP/1.1 200") == 0);
    CHECK(idle_got == "closed");
    CHECK(partial_got == "open");
}

TEST_CASE("a repeated warning is logged once per interval with the count left out", "[http_server]") {
    RepeatedLog log(1000);
    CHECK(log.line(5000, "refused") == "refused");
    CHECK_FALSE(log.line(5010, "refused"));
    CHECK_FALSE(log.line(5999, "refused"));
    CHECK(log.line(6000, "refused") == "refused (2 more like it not logged)");
    CHECK(log.line(9000, "refused") == "refused");
}

TEST_CASE("a pipelining peer that does not read stops being read: its output stays bounded", "[http_server]") {
    HttpLimits limits = default_limits();
    limits.max_output_bytes = 64 << 10;
    Harness h(limits);
    constexpr int kRequests = 1000; // 64 KiB answers: 64 MiB in all
    int handled_unread = 0, answered = 0;
    h.run([&] {
        int fd = h.connect_client();
        std::string all;
        for (int i = 0; i < kRequests; ++i) all += "GET /big HTTP/1.1\r\n\r\n";
        send(fd, all.data(), all.size(), 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        handled_unread = h.n_handled; // the kernel's socket buffers hold ~10 MiB at most
        char buf[65536];
        std::string tail;
        for (ssize_t n; answered < kRequests && (n = recv(fd, buf, sizeof buf, 0)) > 0;) {
            tail.append(buf, size_t(n));
            for (size_t p; (p = tail.find("HTTP/1.1 200")) != std::string::npos;) {
                ++answered;
                tail.erase(0, p + 12);
            }
            if (tail.size() > 16) tail.erase(0, tail.size() - 16);
        }
        ::close(fd);
    });
    CHECK(handled_unread < kRequests / 2);
    CHECK(answered == kRequests); // reading resumes once the peer reads
    // What one connection queued: the high-water mark plus the one 64 KiB answer that crossed it.
    CHECK(h.final_peaks.connection_output_bytes > 0);
    CHECK(h.final_peaks.connection_output_bytes <= limits.max_output_bytes + (65 << 10));
}

TEST_CASE("a stream whose peer reads nothing is closed after the write timeout", "[http_server]") {
    HttpLimits limits = default_limits();
    limits.write_timeout_ms = 300;
    Harness h(limits);
    int closed_while_connected = -1;
    h.run([&] {
        int fd = h.connect_client();
        send(fd, "GET /flood HTTP/1.1\r\n\r\n", 24, 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(2000)); // never reads
        closed_while_connected = h.closed_callbacks;
        ::close(fd);
    });
    CHECK(closed_while_connected == 1);
}

TEST_CASE("request bodies held at once are bounded over all connections: 503 past the budget", "[http_server]") {
    HttpLimits limits = default_limits();
    limits.max_inflight_body_bytes = 100000;
    Harness h(limits);
    std::string refused, first, later;
    h.run([&] {
        char buf[4096];
        auto read_some = [&](int fd, std::string& into) {
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n > 0) into.assign(buf, size_t(n));
        };
        int a = h.connect_client(); // announces 90,000 bytes, sends half: they are held
        std::string head = "POST /a HTTP/1.1\r\nContent-Length: 90000\r\n\r\n";
        send(a, head.data(), head.size(), 0);
        std::string half(45000, 'a');
        send(a, half.data(), half.size(), 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        int b = h.connect_client();
        std::string big = "POST /b HTTP/1.1\r\nContent-Length: 20000\r\n\r\n" + std::string(20000, 'b');
        send(b, big.data(), big.size(), MSG_NOSIGNAL);
        read_some(b, refused);
        send(a, half.data(), half.size(), 0); // a completes and is answered: its bytes go back
        read_some(a, first);
        int c = h.connect_client();
        send(c, big.data(), big.size(), 0);
        read_some(c, later);
        for (int fd : {a, b, c}) ::close(fd);
    });
    CHECK(refused.find("HTTP/1.1 503") == 0);
    CHECK(first.find("HTTP/1.1 200") == 0);
    CHECK(later.find("HTTP/1.1 200") == 0);
    CHECK(h.final_peaks.request_body_bytes == 90000);
    CHECK(h.final_peaks.inflight_body_bytes == 90000); // b's 20,000 were refused, c came after a ended
}
