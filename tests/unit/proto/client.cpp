// ninfer tests - the blocking client over a real Unix socket: replies, refusals, timeouts.
#include "proto/client.h"
#include "proto/messages.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <functional>

#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

using namespace ninfer::proto;

namespace {
struct TestServer {
    std::string path;
    int listen_fd = -1;
    std::thread thread;
    explicit TestServer(std::function<void(int)> serve) {
        path = "/tmp/ninfer-proto-test-" + std::to_string(::getpid()) + ".sock";
        ::unlink(path.c_str());
        listen_fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strcpy(a.sun_path, path.c_str());
        REQUIRE(::bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(listen_fd, 4) == 0);
        thread = std::thread([this, serve] {
            int c = ::accept(listen_fd, nullptr, nullptr);
            if (c >= 0) {
                serve(c);
                ::close(c);
            }
        });
    }
    ~TestServer() {
        thread.join();
        ::close(listen_fd);
        ::unlink(path.c_str());
    }
};

Frame read_frame(int fd) {
    FrameDecoder d;
    uint8_t b[4096];
    for (;;) {
        if (auto f = d.next())
            return *f;
        ssize_t n = ::recv(fd, b, sizeof b, 0);
        if (n <= 0)
            return {};
        d.feed({b, size_t(n)});
    }
}

void reply(int fd, const Frame& req, Status st, std::vector<uint8_t> payload) {
    FrameHeader h;
    h.op = req.header.op;
    h.flags = kFlagReply;
    h.status = int32_t(st);
    h.request_id = req.header.request_id;
    auto b = encode_frame(h, payload);
    REQUIRE(::send(fd, b.data(), b.size(), 0) == ssize_t(b.size()));
}
} // namespace

TEST_CASE("client: request and typed reply over a Unix socket", "[client]") {
    TestServer srv([](int fd) {
        Frame req = read_frame(fd);
        StatusReply s;
        s.model_id = "m";
        reply(fd, req, Status::Ok, encode_payload(s));
    });
    Client c = Client::connect(srv.path, 2000);
    Frame f = c.call(Op::Status, {});
    auto s = decode_payload<StatusReply>(f.payload);
    REQUIRE(s);
    CHECK(s->model_id == "m");
}

TEST_CASE("client: an error status becomes a Refused error with the daemon's message", "[client]") {
    TestServer srv([](int fd) {
        Frame req = read_frame(fd);
        reply(fd, req, Status::Invalid, encode_payload(ErrorReply{"slot 3 is empty"}));
    });
    Client c = Client::connect(srv.path, 2000);
    try {
        c.call(Op::SlotSave, encode_payload(SlotRequest{3, "x"}));
        FAIL("no error");
    } catch (const ClientError& e) {
        CHECK(e.kind() == ClientError::Kind::Refused);
        CHECK(std::string(e.what()) == "slot 3 is empty");
    }
}

TEST_CASE("client: no daemon, and a silent daemon, fail within the timeout", "[client]") {
    try {
        Client::connect("/tmp/ninfer-no-such-socket.sock", 500);
        FAIL("connected");
    } catch (const ClientError& e) {
        CHECK(e.kind() == ClientError::Kind::CannotConnect);
    }
    TestServer srv([](int fd) { read_frame(fd); ::usleep(700000); });
    Client c = Client::connect(srv.path, 300);
    auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(c.call(Op::Status, {}), ClientError);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
}
