// ninfer::core - SHA-256 (FIPS 180-4), incremental: the media digest's hash.
//
// Contract: Sha256 h; h.update(bytes...)*; h.finish() returns the 32-byte digest (the object is
// then spent; finish twice is a bug). sha256(bytes) is the one-shot form. No allocation.
// Where the CPU has the x86 SHA extensions (hardware_available()) the blocks go through them
// (a 720p video's 60 resized frames, 72 MB, hash several times faster); Sha256(false) computes
// the portable C++ rounds; both give the same digest (tests/unit/media/media_decode.cpp).
// Thread safety: an object is used by one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace ninfer::core {

class Sha256 {
  public:
    explicit Sha256(bool allow_hardware = true);
    void update(const void* data, size_t n);
    std::array<uint8_t, 32> finish();
    static bool hardware_available();

  private:
    void blocks(const uint8_t* p, size_t n); // n whole 64-byte blocks
    void block(const uint8_t* p);
    bool hardware_;
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t buf_n_ = 0;
    uint64_t total_ = 0;
};

std::array<uint8_t, 32> sha256(std::span<const uint8_t> bytes);

} // namespace ninfer::core
