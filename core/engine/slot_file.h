// ninfer::core - slot files: one lane's checkpoint (LaneImage) on disk, written crash-safe.
//
// Contract:
// - Layout, version 2 (little-endian): a 4096-byte header, then each section's bytes back to back
//   in directory order (tagged sections, core/backend/lane_image.h):
//     0 "NINFSLOT" | 8 u32 version (2) | 12 u32 header_bytes (4096) | 16 artifact_id[16] |
//     32 model_id[64] (NUL padded) | 96 u8 kv_dtype | 97..99 zero | 100 u32 page_tokens |
//     104 u64 n_tokens | 112 u64 kv_bytes_per_token | 120 u32 n_sections (1..kSlotMaxSections) |
//     124 u32 zero | 128 section directory, n_sections entries of 24 bytes:
//       u32 tag | u32 flags (bit 0: required; the rest zero) | u64 length | u32 crc32c | u32 zero |
//     zeros | 4092 u32 header crc32c (of bytes 0..4091).
//   The writer puts the Tokens section (n_tokens x i32) first, then the image's sections in order,
//   then, when the image holds media, a required MediaDigests section (LaneImage::media,
//   media_digests_encode), which the reader decodes back into LaneImage::media.
// - Version history: 1 (a fixed tokens / kv / gdn payload) is refused with a message naming both
//   versions (save the lane again); 2 has the section directory.
// - slot_file_write publishes through AtomicFile (temp, fsync, rename, directory fsync): the name
//   holds the old file or the complete new one, never a torn one.
// - slot_file_read checks, before allocating anything: size >= header, magic, version, header
//   checksum, model identity (artifact id and model id), KV dtype, page size, token count <=
//   max_context, every section's tag (a duplicate, or an unknown tag marked required, is refused;
//   an unknown optional one is skipped unread), every known section's length against the plan
//   (tokens 4n, kv n x kv_bytes_per_token, gdn the plan's; mtp_kv, whose length depends on the
//   MTP head's progress, and media_digests only against the file: the backend's restore and
//   media_digests_decode check them whole), tokens /
//   kv / gdn all present, and the
//   file size against the sum of the lengths; then reads each known section and verifies its
//   checksum. Every refusal is a ninfer::Error("slot file NAME: reason") that says what to do; the
//   caller's lane is untouched.
#pragma once

#include "core/backend/lane_image.h"
#include "core/util/file_io.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::core {

inline constexpr uint32_t kSlotFileVersion = 2;
inline constexpr uint64_t kSlotHeaderBytes = 4096;
inline constexpr uint32_t kSlotMaxSections = 64;

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
// The NAMEs of the slot files in dir, sorted (none when dir is missing); hidden and temp files skipped.
std::vector<std::string> slot_file_names(const std::string& slots_dir);

SlotFileStats slot_file_write(const std::string& path, const SlotIdentity& identity, const LaneImage& image,
                              FileIoMode mode);
LaneImage slot_file_read(const std::string& path, const SlotIdentity& expected, FileIoMode mode,
                         SlotFileStats* stats = nullptr);

// Parses 32 hex digits into an artifact id (throws ninfer::Error on anything else).
std::array<uint8_t, 16> artifact_id_from_hex(const std::string& hex);

} // namespace ninfer::core
