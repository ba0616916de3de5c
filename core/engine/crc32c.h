// ninfer::core - CRC-32C (Castagnoli), the checksum of slot files and snapshot spills.
//
// Contract: crc32c_extend(crc, bytes) continues a running CRC (start with 0); the result of
// feeding a buffer in pieces equals feeding it whole. Uses the SSE4.2 instruction when the CPU
// has it, else a table; both give the same value (check value of "123456789" is 0xE3069283).
// Thread safety: pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ninfer::core {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n); // table path, for tests

} // namespace ninfer::core
