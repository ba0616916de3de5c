// ninfer::core - UTF-8 helpers for the text frontend: decoding with replacement, encoding, and
// the Unicode White_Space set.
//
// Contract:
// - utf8_next(text, pos) decodes one well-formed sequence at pos. On an ill-formed sequence it
//   returns kReplacementChar and advances pos past the "maximal subpart" (Unicode §3.9, the rule
//   Rust's String::from_utf8_lossy, Python's errors="replace" and WHATWG follow).
// - utf8_scan_stable(bytes) tells how many leading bytes can be decoded now without depending on
//   bytes that have not arrived yet: everything except a trailing truncated-but-valid prefix.
//   Decoding bytes[0, stable) with append_utf8_lossy and later the rest gives exactly the same
//   text as decoding everything at once; this is what lets streaming equal non-streaming output.
// - append_utf8_lossy appends bytes, each maximal ill-formed subpart replaced by U+FFFD.
// - All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ninfer::core {

inline constexpr char32_t kReplacementChar = 0xFFFD;

char32_t utf8_next(std::string_view text, size_t& pos);
void append_utf8(std::string& out, char32_t cp);
void append_utf8_lossy(std::string& out, std::string_view bytes);
std::string utf8_lossy(std::string_view bytes);
bool is_valid_utf8(std::string_view bytes);
size_t utf8_scan_stable(std::string_view bytes);

// Unicode White_Space (what Rust's char::is_whitespace and Oniguruma's \s accept).
bool is_unicode_white_space(char32_t cp);

} // namespace ninfer::core
