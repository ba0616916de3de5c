// ninfer::core - a small streaming JSON writer (compact output, UTF-8 kept raw).
//
// Contract:
// - JsonWriter builds one JSON text: begin_object/end_object, begin_array/end_array, key(name)
//   inside objects, value(...) for scalars, raw(json) for an already-serialised value (inserted
//   verbatim; the caller vouches for it). Commas and colons are inserted automatically; output
//   is compact (no spaces), like Python's json.dumps(separators=(",", ":"), ensure_ascii=False).
// - Strings: `"` and `\` escaped, control characters < 0x20 as \b \f \n \r \t or \u00XX, every
//   other character (non-ASCII UTF-8, DEL, U+2028) kept raw. Invalid UTF-8 throws ninfer::Error.
// - Integers print exactly. Doubles print the shortest digits that round-trip (std::to_chars),
//   laid out like Python's repr (fixed for 1e-4 <= |v| < 1e16, else "1e-06", "1.5e+300"),
//   always with a '.' or an exponent so they read back as floats ("1.0"); NaN and
//   infinities throw ninfer::Error (JSON has no literal for them).
// - Misuse (a value where a key is expected, unbalanced end_*, take() before the document is
//   complete) throws ninfer::Error.
// - json_quote(s) returns s as one JSON string literal.
// Thread safety: one writer per thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

class JsonWriter {
  public:
    JsonWriter& begin_object();
    JsonWriter& end_object();
    JsonWriter& begin_array();
    JsonWriter& end_array();
    JsonWriter& key(std::string_view name);

    JsonWriter& value(std::string_view s);
    JsonWriter& value(const char* s) { return value(std::string_view(s)); }
    JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
    JsonWriter& value(bool b);
    JsonWriter& value(int v) { return value(int64_t(v)); }
    JsonWriter& value(int64_t v);
    JsonWriter& value(uint64_t v);
    JsonWriter& value(unsigned v) { return value(uint64_t(v)); }
    JsonWriter& value(double v);
    JsonWriter& value(float v) = delete; // say which: value(double(f)) prints the f32's exact value
    JsonWriter& null();
    JsonWriter& raw(std::string_view json);

    // Shorthand for key(name).value(v).
    template <typename T> JsonWriter& member(std::string_view name, const T& v) {
        key(name);
        return value(v);
    }

    bool complete() const { return stack_.empty() && has_root_; }
    const std::string& str() const { return out_; }
    std::string take(); // the finished document; the writer is reset

  private:
    enum class Frame : uint8_t { Object, Array };
    void before_value();
    std::string out_;
    std::vector<Frame> stack_;
    bool expect_key_ = false; // inside an object, a key is due
    bool first_ = true;       // no element yet in the innermost container
    bool has_root_ = false;
};

void json_append_quoted(std::string& out, std::string_view s);
std::string json_quote(std::string_view s);
std::string json_number(double v); // as JsonWriter::value(double)

} // namespace ninfer::core
