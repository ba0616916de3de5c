// ninfer tests - core/util/json_writer: escaping, numbers, structure, misuse; read back by simdjson.
#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <catch2/catch.hpp>
#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace ninfer::core;

namespace {

simdjson::dom::element parse(simdjson::dom::parser& p, const std::string& s) {
    simdjson::dom::element e;
    REQUIRE(p.parse(s).get(e) == simdjson::SUCCESS);
    return e;
}

} // namespace

TEST_CASE("strings are escaped minimally and UTF-8 is kept raw", "[json_writer]") {
    CHECK(json_quote("plain") == "\"plain\"");
    CHECK(json_quote("a\"b\\c") == "\"a\\\"b\\\\c\"");
    CHECK(json_quote("\n\r\t\b\f") == "\"\\n\\r\\t\\b\\f\"");
    CHECK(json_quote(std::string("\x01\x1f", 2)) == "\"\\u0001\\u001f\"");
    CHECK(json_quote(std::string("a\0b", 3)) == "\"a\\u0000b\"");
    CHECK(json_quote("/\x7f") == "\"/\x7f\"");
    CHECK(json_quote("é中😀\u2028") == "\"é中😀\u2028\"");
    CHECK_THROWS_AS(json_quote("\xff"), ninfer::Error);
    CHECK_THROWS_AS(json_quote("\xc3"), ninfer::Error);          // truncated sequence
    CHECK_THROWS_AS(json_quote("\xc0\xaf"), ninfer::Error);      // overlong
    CHECK_THROWS_AS(json_quote("\xed\xa0\x80"), ninfer::Error);  // surrogate
    CHECK_THROWS_AS(json_quote("\xf4\x90\x80\x80"), ninfer::Error); // beyond U+10FFFF
    // Every byte 0..127 round-trips through simdjson.
    std::string all;
    for (int c = 1; c < 128; ++c)
        all.push_back(char(c));
    all += "é\xe2\x80\xa8";
    simdjson::dom::parser p;
    CHECK(std::string(parse(p, json_quote(all)).get_string().value()) == all);
}

TEST_CASE("numbers print exactly and round-trip", "[json_writer]") {
    CHECK(json_number(1.0) == "1.0");
    CHECK(json_number(-0.0) == "-0.0");
    CHECK(json_number(0.1) == "0.1");
    CHECK(json_number(1e-6) == "1e-06");
    CHECK(json_number(10000000.0) == "10000000.0");
    // docs/ARTIFACT_FORMAT.md §4.4: rms_norm_eps as upstream writes it
    CHECK(json_number(double(1e-6f)) == "9.999999974752427e-07");
    CHECK(json_number(1e300) == "1e+300");
    CHECK(json_number(1e16) == "1e+16");
    CHECK(json_number(1234567890123456.0) == "1234567890123456.0");
    CHECK(json_number(0.0001) == "0.0001");
    CHECK(json_number(0.00012345) == "0.00012345");
    CHECK(json_number(-2.5e-05) == "-2.5e-05");
    CHECK(json_number(123.456) == "123.456");
    CHECK(json_number(0.0) == "0.0");
    CHECK_THROWS_AS(json_number(std::nan("")), ninfer::Error);
    CHECK_THROWS_AS(json_number(std::numeric_limits<double>::infinity()), ninfer::Error);
    JsonWriter w;
    w.begin_array()
        .value(int64_t(-9223372036854775807LL - 1))
        .value(uint64_t(18446744073709551615ULL))
        .value(0)
        .value(true)
        .value(false)
        .null()
        .end_array();
    CHECK(w.take() == "[-9223372036854775808,18446744073709551615,0,true,false,null]");
    std::mt19937_64 rng(5);
    simdjson::dom::parser p;
    for (int i = 0; i < 2000; ++i) {
        double d;
        uint64_t bits = rng();
        std::memcpy(&d, &bits, 8);
        if (!std::isfinite(d))
            continue;
        double back = parse(p, json_number(d)).get_double().value();
        REQUIRE(std::memcmp(&back, &d, 8) == 0);
    }
}

TEST_CASE("structure: commas, nesting, raw values and misuse", "[json_writer]") {
    JsonWriter w;
    w.begin_object()
        .member("a", 1)
        .key("b").begin_array().begin_object().end_object().begin_array().end_array().value("x").end_array()
        .key("c").raw(R"({"k":[1,2]})")
        .member("d", std::string("s"))
        .key("e").begin_object().member("f", 2.5).end_object()
        .end_object();
    CHECK(w.complete());
    CHECK(w.str() == R"({"a":1,"b":[{},[],"x"],"c":{"k":[1,2]},"d":"s","e":{"f":2.5}})");
    simdjson::dom::parser p;
    parse(p, w.take());
    CHECK_FALSE(w.complete());

    JsonWriter m;
    m.begin_object();
    CHECK_THROWS_AS(m.value(1), ninfer::Error);      // value where a key is due
    m.key("k");
    CHECK_THROWS_AS(m.key("k2"), ninfer::Error);     // key after a key
    CHECK_THROWS_AS(m.end_object(), ninfer::Error);  // dangling key
    CHECK_THROWS_AS(m.end_array(), ninfer::Error);
    m.value(1).end_object();
    CHECK_THROWS_AS(m.value(2), ninfer::Error);      // second top-level value
    JsonWriter open;
    open.begin_array();
    CHECK_THROWS_AS(open.take(), ninfer::Error);
    CHECK_THROWS_AS(open.key("x"), ninfer::Error);
    CHECK_THROWS_AS(open.raw(""), ninfer::Error);
}
