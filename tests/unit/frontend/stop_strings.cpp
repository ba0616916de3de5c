// Stop strings across token boundaries: exact cut at the first match, minimal hold-back.
#include "core/frontend/stop_strings.h"

#include <catch2/catch.hpp>

#include <random>

using namespace ninfer::core;

TEST_CASE("a stop string split across pieces is found and cut", "[stop_strings]") {
    StopStringMatcher m({"STOP", "\n\n"});
    std::string out = m.feed("Hello ST");
    CHECK(out == "Hello ");  // "ST" may start STOP: held back
    out += m.feed("O");
    CHECK(out == "Hello ");
    out += m.feed("P and more");
    CHECK(m.matched());
    CHECK(m.matched_string() == "STOP");
    CHECK(out == "Hello ");
    CHECK(m.feed("ignored").empty());
}

TEST_CASE("held text is released as soon as it cannot match", "[stop_strings]") {
    StopStringMatcher m({"abc"});
    CHECK(m.feed("xab") == "x");
    CHECK(m.feed("d") == "abd");
    CHECK(m.feed("a") == "");
    CHECK(m.flush() == "a");
    CHECK(!m.matched());
}

TEST_CASE("the match that completes first wins, then the longest", "[stop_strings]") {
    StopStringMatcher m({"bcd", "abcd", "abcde"});
    CHECK(m.feed("xxabcdef") == "xx");
    CHECK(m.matched_string() == "abcd");
    StopStringMatcher n({"abcd", "c"});
    CHECK(n.feed("abcd") == "ab");
    CHECK(n.matched_string() == "c");
    CHECK(held_prefix_length("hello <to", "<tool_call>") == 3);
    CHECK(held_prefix_length("abc", "abc") == 0);  // a full token is not a proper prefix
}

TEST_CASE("random texts and random splits equal the one-shot cut", "[stop_strings]") {
    std::mt19937 rng(1234);
    for (int round = 0; round < 2000; ++round) {
        auto random_text = [&](size_t max_len) {
            std::string s(rng() % (max_len + 1), 'a');
            for (char& c : s) c = "abc\xc3"[rng() % 4];
            return s;
        };
        std::vector<std::string> stops;
        for (int i = 0, n = 1 + rng() % 3; i < n; ++i) stops.push_back(random_text(4));
        const std::string text = random_text(40);
        size_t cut = std::string::npos, cut_end = std::string::npos;
        for (const std::string& s : stops) {
            const size_t at = s.empty() ? std::string::npos : text.find(s);
            if (at != std::string::npos && (at + s.size() < cut_end || (at + s.size() == cut_end && at < cut))) {
                cut = at;
                cut_end = at + s.size();
            }
        }
        StopStringMatcher m(stops);
        std::string out;
        for (size_t pos = 0; pos < text.size();) {
            const size_t n = 1 + rng() % 5;
            out += m.feed(std::string_view(text).substr(pos, n));
            pos += n;
        }
        if (!m.matched()) out += m.flush();
        INFO("text " << text);
        CHECK(m.matched() == (cut != std::string::npos));
        CHECK(out == text.substr(0, cut));
        if (m.matched()) CHECK(text.compare(cut, m.matched_string().size(), m.matched_string()) == 0);
    }
}
