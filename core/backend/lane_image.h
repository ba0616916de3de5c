// ninfer::core - LaneImage: the host copy of one lane's whole state (checkpoints, slot files), as
// tagged sections so that a new kind of state (the MTP layer's KV, media digests) adds one section
// instead of a second layout.
//
// Contract:
// - tokens: the sequence's token ids, position i = tokens[i] (kept typed: the scheduler and the
//   prefix cache compare them; a slot file stores them as the Tokens section).
// - sections: the state, one LaneSection per tag, in the order added (a slot file keeps it):
//     Kv  every full-attention layer's K then V rows of positions [0, n) in kv_dtype's row format
//         (core/model/kv_codec.h), MemoryPlan::lane_image_kv_bytes(n) bytes;
//     Gdn every GDN layer's conv history, then every GDN layer's fp32 recurrent state,
//         MemoryPlan::lane_image_gdn_bytes() bytes.
//     MtpKv (optional: without it a lane only drafts worse) the MTP head's state, written by a
//         backend whose plan has mtp: u32 mtp_length m, u32 r, the MTP layer's K then V rows of
//         positions [0, m) in kv_dtype's row format (n_kv_heads rows each), then the r = n - m
//         final hidden rows (H f32 each) the head has not taken yet.
//     RopePosition (only when a multimodal prefill moved the lane's positions off its token
//         count; required, since positions a reader ignores would silently change the output):
//         u32 next text position (backend.h prefill_with).
//     MediaDigests (slot files; in memory LaneImage::media) the images and videos whose
//         placeholder tokens the sequence holds: u32 count, then per item u32 position, u32
//         n_tokens, 32 digest bytes (media_digests_encode / media_digests_decode). Required: a
//         reader that dropped it would match the tokens of other pixels.
//   The byte layout belongs to the backend that wrote it, but the CPU and CUDA backends use the
//   same one so an image moves between them.
// - add_section(tag, n) allocates a section of n zero bytes and returns where to fill it. The span
//   stays valid while the image lives, even after more sections are added or the image is moved
//   (a section's buffer never moves), so a backend may fill a section later, from a staging
//   buffer or another thread, before it hands the image on. A tag appears at most once
//   (a second add_section of it throws ninfer::Error).
// - lane_image_check(image, plan) is what every backend's restore_lane checks first: the plan's KV
//   dtype, at most max_context tokens, Kv and Gdn sections of the plan's sizes, no other required
//   section but the ones the caller names in `restorable` (MtpKv is optional and checked by the
//   backend that reads it); ninfer::Error("backend: ...") otherwise.
// - set_rope_offset(image, offset) adds the RopePosition section for a lane whose next text
//   position is its token count + offset (nothing when offset is 0); image_rope_offset(image) reads
//   it back (0 without the section; ninfer::Error("backend: ...") for a section of another size).
// - Tags are written into slot files: append-only, never renumbered. A section is `required` when
//   a reader that does not know its tag must refuse the image rather than drop it.
// Thread safety: plain data.
#pragma once

#include "core/model/kv_codec.h"
#include "core/model/memory_plan.h"
#include "core/util/zeroed_pages.h"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ninfer::core {

enum class LaneSectionTag : uint32_t {
    Tokens = 1,       // i32 token ids (slot files; in memory LaneImage::tokens)
    Kv = 2,           // full-attention layers' K and V rows
    Gdn = 3,          // GDN conv histories, then recurrent states
    MtpKv = 4,        // optional: the MTP head's K and V rows and its pending hidden rows
    MediaDigests = 5, // digests of the media in the sequence (LaneImage::media)
    RopePosition = 6, // the lane's next text position when it differs from its length (M-RoPE)
};

// One image or video in a sequence: its placeholder tokens run from `position` for `n_tokens`
// (the first to the last pad token of the item; a video's timestamps and frame markers lie
// inside), and `digest` is its VisionInput::digest (core/vision/vision_input.h). Two sequences
// are the same state only if their tokens AND the media spans starting within them agree.
struct MediaSpan {
    uint32_t position = 0;
    uint32_t n_tokens = 0;
    std::array<uint8_t, 32> digest{};
    bool operator==(const MediaSpan&) const = default;
};

// The spans that start before position n (what a prefix of n tokens holds).
std::vector<MediaSpan> media_within(std::span<const MediaSpan> media, size_t n);
// Whether two sequences agreeing on their first n tokens also agree on the media in them.
bool media_prefix_equal(std::span<const MediaSpan> a, std::span<const MediaSpan> b, size_t n);
std::vector<uint8_t> media_digests_encode(std::span<const MediaSpan> media);
// Throws ninfer::Error("backend: ...") for bytes that are not a whole encoding.
std::vector<MediaSpan> media_digests_decode(std::span<const uint8_t> bytes);

// "tokens", "kv", "gdn", "mtp_kv", "media_digests", or "tag N" for a tag this build does not know.
std::string lane_section_name(uint32_t tag);

// A section's bytes: zeroed, huge-page backed when large (util/zeroed_pages.h), so filling a
// checkpoint from the GPU's staging buffers is one pass over fresh memory.
using SectionBytes = std::vector<uint8_t, ZeroedPageAllocator<uint8_t>>;

struct LaneSection {
    LaneSectionTag tag = LaneSectionTag::Kv;
    bool required = true;
    SectionBytes bytes;
    bool operator==(const LaneSection&) const = default;
};

struct LaneImage {
    std::vector<int32_t> tokens;  // token ids of the sequence, position i = tokens[i]
    std::vector<MediaSpan> media; // the media among those tokens (empty for text)
    KvDtype kv_dtype = KvDtype::Bf16;
    std::vector<LaneSection> sections;

    std::span<uint8_t> add_section(LaneSectionTag tag, uint64_t n_bytes, bool required = true);
    const LaneSection* find(LaneSectionTag tag) const; // nullptr when absent
    std::span<const uint8_t> section(LaneSectionTag tag) const; // empty when absent
    std::span<uint8_t> section(LaneSectionTag tag);
    std::span<const uint8_t> kv() const { return section(LaneSectionTag::Kv); }
    std::span<uint8_t> kv() { return section(LaneSectionTag::Kv); }
    std::span<const uint8_t> gdn() const { return section(LaneSectionTag::Gdn); }
    std::span<uint8_t> gdn() { return section(LaneSectionTag::Gdn); }
    uint64_t n_bytes() const; // token ids plus every section's bytes
    bool operator==(const LaneImage&) const = default;
};

void lane_image_check(const LaneImage& image, const MemoryPlan& plan,
                      std::span<const LaneSectionTag> restorable = {});
void set_rope_offset(LaneImage& image, int64_t rope_offset);
int64_t image_rope_offset(const LaneImage& image);

} // namespace ninfer::core
