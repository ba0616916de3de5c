// ninfer::core - LaneImage sections: add, find, size, and the check before a restore.
#include "core/backend/lane_image.h"

#include "core/util/error.h"

#include <algorithm>

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

uint64_t LaneImage::n_bytes() const {
    uint64_t n = tokens.size() * sizeof(int32_t);
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

} // namespace ninfer::core
