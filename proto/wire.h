// ninfer::proto - a little-endian byte cursor with a sticky error (after Knot's wire_ctx).
//
// Contract:
// - WireWriter appends fixed-width little-endian integers, doubles, and length-prefixed strings
//   (u32 length + bytes) to a growable buffer.
// - WireReader reads the same from a byte span. Any read past the end, or a string longer than
//   what remains, sets a sticky error: later reads return zero values and ok() stays false. A
//   reader never reads outside its span, whatever the input.
// - Strings are raw bytes; the protocol does not require UTF-8.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::proto {

class WireWriter {
  public:
    void u8(uint8_t v) { buf_.push_back(v); }
    void u16(uint16_t v) { put(&v, 2); }
    void u32(uint32_t v) { put(&v, 4); }
    void u64(uint64_t v) { put(&v, 8); }
    void i32(int32_t v) { put(&v, 4); }
    void i64(int64_t v) { put(&v, 8); }
    void f64(double v) { put(&v, 8); }
    void boolean(bool v) { u8(v ? 1 : 0); }
    void str(std::string_view s) {
        u32(uint32_t(s.size()));
        buf_.insert(buf_.end(), s.begin(), s.end());
    }
    std::vector<uint8_t>& bytes() { return buf_; }

  private:
    // The protocol is little-endian; every supported host (x86-64, aarch64) is too.
    void put(const void* p, size_t n) {
        const uint8_t* b = static_cast<const uint8_t*>(p);
        buf_.insert(buf_.end(), b, b + n);
    }
    std::vector<uint8_t> buf_;
};

class WireReader {
  public:
    explicit WireReader(std::span<const uint8_t> data) : data_(data) {}
    uint8_t u8() { return get<uint8_t>(); }
    uint16_t u16() { return get<uint16_t>(); }
    uint32_t u32() { return get<uint32_t>(); }
    uint64_t u64() { return get<uint64_t>(); }
    int32_t i32() { return get<int32_t>(); }
    int64_t i64() { return get<int64_t>(); }
    double f64() { return get<double>(); }
    bool boolean() {
        uint8_t v = u8();
        if (v > 1)
            ok_ = false;
        return v == 1;
    }
    std::string str() {
        uint32_t n = u32();
        if (!ok_ || n > remaining()) {
            ok_ = false;
            return {};
        }
        std::string s(reinterpret_cast<const char*>(data_.data() + pos_), n);
        pos_ += n;
        return s;
    }
    // A count of items that each take at least `min_item_bytes`: refuses counts the remaining
    // bytes cannot hold, so a decoder never reserves memory for a lie.
    uint32_t count(size_t min_item_bytes) {
        uint32_t n = u32();
        if (!ok_ || (min_item_bytes && uint64_t(n) * min_item_bytes > remaining())) {
            ok_ = false;
            return 0;
        }
        return n;
    }
    size_t remaining() const { return data_.size() - pos_; }
    bool ok() const { return ok_; }
    bool at_end() const { return ok_ && pos_ == data_.size(); }
    void fail() { ok_ = false; }

  private:
    template <typename T> T get() {
        T v{};
        if (!ok_ || remaining() < sizeof(T)) {
            ok_ = false;
            return v;
        }
        std::memcpy(&v, data_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::span<const uint8_t> data_;
    size_t pos_ = 0;
    bool ok_ = true;
};

} // namespace ninfer::proto
