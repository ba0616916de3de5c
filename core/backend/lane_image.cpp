// ninfer::core - LaneImage sections: add, find, size, the check before a restore, the RoPE position.
#include "core/backend/lane_image.h"

#include "core/util/error.h"

#include <algorithm>
#include <cstring>

namespace ninfer::core {

std::string lane_section_name(uint32_t tag) {
    switch (LaneSectionTag(tag)) {
    case LaneSectionTag::Tokens: return "tokens";
    case LaneSectionTag::Kv: return "kv";
    case LaneSectionTag::Gdn: return "gdn";
    case LaneSectionTag::MtpKv: return "mtp_kv";
    case LaneSectionTag::MediaDigests: return "media_digests";
    case LaneSectionTag::RopePosition: return "rope_position";
    }
    return "tag " + std::to_string(tag);
}

std::span<uint8_t> LaneImage::add_section(LaneSectionTag tag, uint64_t n_bytes, bool required) {
    if (find(tag)) throw Error("lane image: a second " + lane_section_name(uint32_t(tag)) + " section");
    LaneSection& s = sections.emplace_back();
    s.tag = tag;
    s.required = required;
    s.bytes.resize(n_bytes);
    return s.bytes;
}

const LaneSection* LaneImage::find(LaneSectionTag tag) const {
    for (const LaneSection& s : sections)
        if (s.tag == tag) return &s;
    return nullptr;
}

std::span<const uint8_t> LaneImage::section(LaneSectionTag tag) const {
    const LaneSection* s = find(tag);
    return s ? std::span<const uint8_t>(s->bytes) : std::span<const uint8_t>();
}

std::span<uint8_t> LaneImage::section(LaneSectionTag tag) {
    for (LaneSection& s : sections)
        if (s.tag == tag) return s.bytes;
    return {};
}

std::vector<MediaSpan> media_within(std::span<const MediaSpan> media, size_t n) {
    std::vector<MediaSpan> out;
    for (const MediaSpan& m : media)
        if (m.position < n) out.push_back(m);
    return out;
}

bool media_prefix_equal(std::span<const MediaSpan> a, std::span<const MediaSpan> b, size_t n) {
    return media_within(a, n) == media_within(b, n);
}

namespace {
constexpr size_t kMediaSpanBytes = 4 + 4 + 32;
void put_u32(std::vector<uint8_t>& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(uint8_t(v >> (8 * i)));
}
uint32_t get_u32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
} // namespace

std::vector<uint8_t> media_digests_encode(std::span<const MediaSpan> media) {
    std::vector<uint8_t> out;
    put_u32(out, uint32_t(media.size()));
    for (const MediaSpan& m : media) {
        put_u32(out, m.position);
        put_u32(out, m.n_tokens);
        out.insert(out.end(), m.digest.begin(), m.digest.end());
    }
    return out;
}

std::vector<MediaSpan> media_digests_decode(std::span<const uint8_t> bytes) {
    if (bytes.size() < 4) throw Error("backend: a media_digests section of " + std::to_string(bytes.size()) + " bytes");
    const uint32_t n = get_u32(bytes.data());
    if ((bytes.size() - 4) / kMediaSpanBytes != n || (bytes.size() - 4) % kMediaSpanBytes != 0)
        throw Error("backend: a media_digests section of " + std::to_string(bytes.size()) + " bytes does not hold " +
                    std::to_string(n) + " items");
    std::vector<MediaSpan> out(n);
    for (uint32_t i = 0; i < n; ++i) {
        const uint8_t* p = bytes.data() + 4 + size_t(i) * kMediaSpanBytes;
        out[i].position = get_u32(p);
        out[i].n_tokens = get_u32(p + 4);
        std::copy(p + 8, p + 40, out[i].digest.begin());
    }
    return out;
}

uint64_t LaneImage::n_bytes() const {
    uint64_t n = tokens.size() * sizeof(int32_t) + media.size() * kMediaSpanBytes;
    for (const LaneSection& s : sections) n += s.bytes.size();
    return n;
}

void lane_image_check(const LaneImage& img, const MemoryPlan& plan, std::span<const LaneSectionTag> restorable) {
    const uint32_t n = uint32_t(img.tokens.size());
    if (img.kv_dtype != plan.kv_dtype) throw Error("backend: lane image KV dtype differs from the plan's");
    if (img.tokens.size() > plan.max_context)
        throw Error("backend: lane image of " + std::to_string(img.tokens.size()) + " tokens exceeds max-context");
    const LaneSection *kv = img.find(LaneSectionTag::Kv), *gdn = img.find(LaneSectionTag::Gdn);
    if (!kv || !gdn || kv->bytes.size() != plan.lane_image_kv_bytes(n) ||
        gdn->bytes.size() != plan.lane_image_gdn_bytes())
        throw Error("backend: lane image sizes do not match the plan (kv " + std::to_string(img.kv().size()) +
                    " bytes, gdn " + std::to_string(img.gdn().size()) + ")");
    for (const LaneSection& s : img.sections)
        if (s.required && s.tag != LaneSectionTag::Kv && s.tag != LaneSectionTag::Gdn &&
            std::find(restorable.begin(), restorable.end(), s.tag) == restorable.end())
            throw Error("backend: lane image holds a " + lane_section_name(uint32_t(s.tag)) +
                        " section this backend cannot restore");
}

void set_rope_offset(LaneImage& img, int64_t rope_offset) {
    if (rope_offset == 0) return;
    const uint32_t next = uint32_t(int64_t(img.tokens.size()) + rope_offset);
    std::memcpy(img.add_section(LaneSectionTag::RopePosition, 4).data(), &next, 4);
}

int64_t image_rope_offset(const LaneImage& img) {
    if (!img.find(LaneSectionTag::RopePosition)) return 0;
    const std::span<const uint8_t> rope = img.section(LaneSectionTag::RopePosition);
    if (rope.size() != 4)
        throw Error("backend: lane image rope_position section of " + std::to_string(rope.size()) +
                    " bytes, 4 expected");
    uint32_t next = 0;
    std::memcpy(&next, rope.data(), 4);
    return int64_t(next) - int64_t(img.tokens.size());
}

} // namespace ninfer::core
