// ninfer::core - slot files: one lane's checkpoint (LaneImage) on disk, written crash-safe.
//
// Contract:
// - Layout (little-endian): a 4096-byte header, then the token ids (n_tokens x i32), the KV rows
//   (kv_bytes) and the GDN state (gdn_bytes) exactly as LaneImage holds them:
//     0 "NINFSLOT" | 8 u32 version (1) | 12 u32 header_bytes (4096) | 16 artifact_id[16] |
//     32 model_id[64] (NUL padded) | 96 u8 kv_dtype | 97..99 zero | 100 u32 page_tokens |
//     104 u64 n_tokens | 112 u64 kv_bytes_per_token | 120 u64 kv_bytes | 128 u64 gdn_bytes |
//     136 u64 payload_bytes | 144 u32 payload crc32c | 148 u32 header crc32c (of bytes 0..147) |
//     zeros to 4096.
// - slot_file_write publishes through AtomicFile (temp, fsync, rename, directory fsync): the name
//   holds the old file or the complete new one, never a torn one.
// - slot_file_read checks, before allocating anything: size >= header, magic, version, header
//   checksum, model identity (artifact id and model id), KV dtype, page size, token count <=
//   max_context, kv/gdn sizes against the plan's per-token and per-lane figures, and the file size
//   against the declared sizes; then reads and verifies the payload checksum. Every refusal is a
//   ninfer::Error("slot file NAME: reason") that says what to do; the caller's lane is untouched.
// Thread safety: pure functions over files; run them on the I/O thread, not the engine thread.
#pragma once

#include "core/backend/backend.h"
#include "core/util/file_io.h"

#include <array>
#include <cstdint>
#include <string>

namespace ninfer::core {

inline constexpr uint32_t kSlotFileVersion = 1;
inline constexpr uint64_t kSlotHeaderBytes = 4096;

// What a slot file must match to be restored into this daemon's lanes.
struct SlotIdentity {
    std::array<uint8_t, 16> artifact_id{};
    std::string model_id; // at most 63 bytes are stored
    KvDtype kv_dtype = KvDtype::Bf16;
    uint32_t page_tokens = 64;
    uint64_t kv_bytes_per_token = 0;
    uint64_t gdn_bytes = 0;
    uint32_t max_context = 0;
};

struct SlotFileStats {
    uint64_t n_tokens = 0;
    uint64_t bytes = 0; // whole file
    double elapsed_ms = 0;
    FileIoMode mode = FileIoMode::Plain;
};

// `dir/NAME.nslot`; NAME must already be valid (proto::is_valid_slot_name).
std::string slot_file_path(const std::string& slots_dir, const std::string& name);

SlotFileStats slot_file_write(const std::string& path, const SlotIdentity& identity, const LaneImage& image,
                              FileIoMode mode);
LaneImage slot_file_read(const std::string& path, const SlotIdentity& expected, FileIoMode mode,
                         SlotFileStats* stats = nullptr);

// Parses 32 hex digits into an artifact id (throws ninfer::Error on anything else).
std::array<uint8_t, 16> artifact_id_from_hex(const std::string& hex);

} // namespace ninfer::core
