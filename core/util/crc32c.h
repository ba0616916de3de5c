// ninfer::core - CRC-32C (Castagnoli), the checksum of slot files, snapshot spills and artifact
// payload objects.
//
// Contract: crc32c_extend(crc, bytes) continues a running CRC (start with 0); the result of
// feeding a buffer in pieces equals feeding it whole. Uses the SSE4.2 instruction when the CPU
// has it, else a table; both give the same value (check value of "123456789" is 0xE3069283).
// crc32c_combine(crc_a, crc_b, n_b) is the CRC of A followed by B given only their CRCs and B's
// length (zlib's crc32_combine method, O(log n_b)): pieces written out of order are joined.
// crc32c_extend_zeros(crc, n) = crc32c_extend(crc, n zero bytes) in O(log n) (sparse holes).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ninfer::core {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t n_b);
uint32_t crc32c_extend_zeros(uint32_t crc, uint64_t n);
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n); // table path, for tests

} // namespace ninfer::core
