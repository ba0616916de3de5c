// ninfer tests - write batching: output written between HttpServer::cork() and uncork() reaches
// the peer whole and in order, in one write per connection; a connection closed while corked
// drops its gathered bytes safely; gathered bytes count as unsent output.
#include "tests/unit/daemon/http_harness.h"

#include <array>

using namespace ninfer::daemon;
using namespace ninfer::daemon::test;

namespace {

// Reads from fd until `marker` has arrived or the peer closes; returns everything read.
std::string read_until(int fd, const std::string& marker) {
    std::string got;
    char buf[4096];
    while (got.find(marker) == std::string::npos) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        got.append(buf, size_t(n));
    }
    return got;
}

// Opens two connections that each GET /stream-open, the first a little before the second.
std::array<int, 2> open_two_streams(const Harness& h) {
    std::array<int, 2> fd{};
    for (int& f : fd) {
        f = h.connect_client();
        const std::string req = "GET /stream-open HTTP/1.1\r\nHost: x\r\n\r\n";
        send(f, req.data(), req.size(), 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    return fd;
}

} // namespace

TEST_CASE("writes while corked reach each peer in order, as one write per connection", "[http_cork]") {
    Harness h(default_limits());
    std::vector<std::shared_ptr<ResponseWriter>> streams;
    uint64_t writes_in_burst = 0;
    size_t gathered_seen = 0;
    h.custom = [&](HttpRequest& r, std::shared_ptr<ResponseWriter> w) {
        if (r.path != "/stream-open") return false;
        w->start_stream(200, "text/event-stream");
        streams.push_back(w);
        if (streams.size() < 2) return true;
        // Both streams are open: one burst of engine events, as the loop bridge runs them.
        const uint64_t before = h.server->write_figures().n_writes;
        h.server->cork();
        for (int i = 0; i < 5; ++i)
            for (auto& s : streams) s->write("data: " + std::to_string(i) + "\n\n");
        gathered_seen = streams[0]->write_queue_bytes();
        for (auto& s : streams) s->end();
        h.server->uncork();
        writes_in_burst = h.server->write_figures().n_writes - before;
        return true;
    };
    std::string got[2];
    h.run([&] {
        const std::array<int, 2> fd = open_two_streams(h);
        for (int c = 0; c < 2; ++c) {
            got[c] = read_until(fd[c], "0\r\n\r\n");
            ::close(fd[c]);
        }
    });
    CHECK(writes_in_burst == 2); // ten events and two stream ends, one write per connection
    CHECK(gathered_seen > 0);    // the gathered bytes count as unsent output (backpressure sees them)
    for (const std::string& g : got) {
        size_t at = g.find("\r\n\r\n"); // after the response head
        REQUIRE(at != std::string::npos);
        for (int i = 0; i < 5; ++i) {
            size_t next = g.find("data: " + std::to_string(i) + "\n\n", at);
            REQUIRE(next != std::string::npos);
            at = next;
        }
        CHECK((g.size() >= 5 && g.substr(g.size() - 5) == "0\r\n\r\n")); // the chunked stream's end, last
    }
}

TEST_CASE("a connection closed while corked drops its gathered output; the others still get theirs", "[http_cork]") {
    Harness h(default_limits());
    std::vector<std::shared_ptr<ResponseWriter>> streams;
    h.custom = [&](HttpRequest& r, std::shared_ptr<ResponseWriter> w) {
        if (r.path != "/stream-open") return false;
        w->start_stream(200, "text/event-stream");
        w->on_close([] {});
        streams.push_back(w);
        if (streams.size() < 2) return true;
        h.server->cork();
        for (auto& s : streams) s->write("data: gathered\n\n");
        streams[0]->write("data: more\n\n");
        h.server->close_all();            // both connections go while their output is gathered
        h.server->uncork();               // nothing left to write, nothing touched after close
        CHECK_FALSE(streams[0]->is_open());
        return true;
    };
    std::string got;
    h.run([&] {
        const std::array<int, 2> fd = open_two_streams(h);
        got = read_until(fd[0], "never");
        ::close(fd[0]);
        ::close(fd[1]);
    });
    CHECK(got.find("data: gathered") == std::string::npos); // dropped with its connection
    CHECK(got.find("HTTP/1.1 200") == 0);                   // the head was written before the cork
}
