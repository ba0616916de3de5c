// ninfer tests - NFC against Unicode's NormalizationTest, and UTF-8 replacement rules.
#include "core/frontend/unicode_nfc.h"
#include "core/frontend/unicode_utf8.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

using namespace ninfer::core;

namespace {

std::string from_hex_code_points(const std::string& field) {
    std::istringstream in(field);
    std::string out;
    for (std::string hex; in >> hex;)
        append_utf8(out, char32_t(std::stoul(hex, nullptr, 16)));
    return out;
}

} // namespace

TEST_CASE("NFC matches Unicode NormalizationTest (subset of 15.0.0)", "[tokenizer_unicode]") {
    std::ifstream in(NINFER_SOURCE_DIR "/tests/fixtures/frontend/tokenizer_nfc_cases.txt");
    REQUIRE(in.good());
    size_t n_cases = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        size_t semi = line.find(';');
        std::string source = from_hex_code_points(line.substr(0, semi));
        std::string expected = from_hex_code_points(line.substr(semi + 1));
        INFO(line);
        CHECK(nfc_normalize(source) == expected);
        CHECK(nfc_normalize(expected) == expected);
        ++n_cases;
    }
    CHECK(n_cases > 1000);
    CHECK(std::string(nfc_unicode_version()) == "15.0.0");
}

TEST_CASE("NFC: Hangul, reordering, exclusions, quick check", "[tokenizer_unicode]") {
    CHECK(nfc_normalize("\u1100\u1161\u11A8") == "\uAC01");        // L V T -> one syllable
    CHECK(nfc_normalize("\uAC00\u11A8") == "\uAC01");              // LV + T
    CHECK(nfc_normalize("a\u0323\u0302") == "\u1EAD");            // ccc 220 then 230
    CHECK(nfc_normalize("a\u0302\u0323") == "\u1EAD");            // reordered first
    CHECK(nfc_normalize("\u0958") == "\u0915\u093C");             // composition exclusion
    CHECK(nfc_normalize("\u212B") == "\u00C5");                   // singleton Angstrom sign
    CHECK(nfc_quick_check("plain ASCII and \u4f60\u597d and \uAC01"));
    CHECK_FALSE(nfc_quick_check("e\u0301"));
}

TEST_CASE("ill-formed UTF-8: one U+FFFD per maximal subpart (Unicode Table 3-8)", "[tokenizer_unicode]") {
    std::string bytes("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64");
    CHECK(utf8_lossy(bytes) == "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd");
    CHECK(utf8_lossy("\xED\xA0\x80") == "\uFFFD\uFFFD\uFFFD"); // surrogates are ill-formed
    CHECK(utf8_lossy("\xF4\x90\x80\x80") == "\uFFFD\uFFFD\uFFFD\uFFFD");
    CHECK(utf8_lossy("ok \uFFFD") == "ok \uFFFD");
    CHECK(is_valid_utf8(std::string("\0", 1)));
    CHECK_FALSE(is_valid_utf8("\xC0\xAF"));
}

TEST_CASE("utf8_scan_stable holds back only a truncated valid prefix", "[tokenizer_unicode]") {
    CHECK(utf8_scan_stable("abc") == 3);
    CHECK(utf8_scan_stable("ab\xE4\xBD") == 2);
    CHECK(utf8_scan_stable("ab\xE4\x41") == 4);      // E4 then 'A': ill-formed now, not later
    CHECK(utf8_scan_stable("\xF0\x9F\x98") == 0);
    CHECK(utf8_scan_stable("\xE0\x80") == 2);
    CHECK(utf8_scan_stable("\xFF") == 1);
}
