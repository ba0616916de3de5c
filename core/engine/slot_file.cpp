// ninfer::core - slot file writer and validating reader (header checked before any allocation).
#include "core/engine/slot_file.h"

#include "core/util/crc32c.h"
#include "core/model/kv_codec.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace ninfer::core {
namespace {

constexpr char kMagic[8] = {'N', 'I', 'N', 'F', 'S', 'L', 'O', 'T'};
constexpr size_t kModelIdBytes = 64;
constexpr size_t kDirectoryAt = 128;
constexpr size_t kEntryBytes = 24;
constexpr size_t kHeaderCrcAt = kSlotHeaderBytes - 4;
constexpr uint32_t kFlagRequired = 1;
static_assert(kDirectoryAt + kSlotMaxSections * kEntryBytes <= kHeaderCrcAt);

struct SectionEntry {
    uint32_t tag = 0, flags = 0;
    uint64_t length = 0;
    uint32_t crc = 0;
    const void* data = nullptr; // writer only
};

struct Header {
    std::array<uint8_t, 16> artifact_id{};
    std::string model_id;
    uint8_t kv_dtype = 0;
    uint32_t page_tokens = 0;
    uint64_t n_tokens = 0, kv_bytes_per_token = 0;
    std::vector<SectionEntry> sections;
};

template <typename T> void put(uint8_t* at, T v) { std::memcpy(at, &v, sizeof v); }
template <typename T> T get(const uint8_t* at) {
    T v;
    std::memcpy(&v, at, sizeof v);
    return v;
}

std::vector<uint8_t> encode_header(const Header& h) {
    std::vector<uint8_t> b(kSlotHeaderBytes, 0);
    std::memcpy(b.data(), kMagic, 8);
    put<uint32_t>(&b[8], kSlotFileVersion);
    put<uint32_t>(&b[12], uint32_t(kSlotHeaderBytes));
    std::memcpy(&b[16], h.artifact_id.data(), 16);
    std::memcpy(&b[32], h.model_id.data(), std::min(h.model_id.size(), kModelIdBytes - 1));
    b[96] = h.kv_dtype;
    put<uint32_t>(&b[100], h.page_tokens);
    put<uint64_t>(&b[104], h.n_tokens);
    put<uint64_t>(&b[112], h.kv_bytes_per_token);
    put<uint32_t>(&b[120], uint32_t(h.sections.size()));
    for (size_t i = 0; i < h.sections.size(); ++i) {
        uint8_t* e = &b[kDirectoryAt + i * kEntryBytes];
        put<uint32_t>(e, h.sections[i].tag);
        put<uint32_t>(e + 4, h.sections[i].flags);
        put<uint64_t>(e + 8, h.sections[i].length);
        put<uint32_t>(e + 16, h.sections[i].crc);
    }
    put<uint32_t>(&b[kHeaderCrcAt], crc32c_extend(0, b.data(), kHeaderCrcAt));
    return b;
}

std::string hex(const std::array<uint8_t, 16>& id) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (uint8_t v : id) {
        s += digits[v >> 4];
        s += digits[v & 15];
    }
    return s;
}

std::string dtype_text(uint8_t code) {
    return code <= uint8_t(KvDtype::Int8) ? std::string(kv_dtype_name(KvDtype(code)))
                                          : "unknown (" + std::to_string(code) + ")";
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool is_readable_tag(uint32_t tag) {
    return tag == uint32_t(LaneSectionTag::Tokens) || tag == uint32_t(LaneSectionTag::Kv) ||
           tag == uint32_t(LaneSectionTag::Gdn) || tag == uint32_t(LaneSectionTag::MtpKv) ||
           tag == uint32_t(LaneSectionTag::RopePosition) ||
           tag == uint32_t(LaneSectionTag::MediaDigests);
}

// Sections whose length the header alone fixes; the others' (MtpKv: it depends on how far the
// MTP head got; MediaDigests: on the media count) are bounded by the file size here and checked
// whole by their reader (the backend's restore; media_digests_decode).
bool has_fixed_length(uint32_t tag) {
    return is_readable_tag(tag) && tag != uint32_t(LaneSectionTag::MtpKv) && tag != uint32_t(LaneSectionTag::MediaDigests);
}

// Every check that needs only the header and the file size; throws with the refusal reason.
Header check_header(const uint8_t* b, uint64_t file_bytes, const SlotIdentity& want, const std::string& what) {
    auto refuse = [&](const std::string& reason) { throw Error(what + ": " + reason); };
    if (std::memcmp(b, kMagic, 8) != 0) refuse("not a slot file (bad magic)");
    uint32_t version = get<uint32_t>(b + 8);
    if (version != kSlotFileVersion)
        refuse("format version " + std::to_string(version) + " is not supported: this ninferd reads version " +
               std::to_string(kSlotFileVersion) + " only (tagged sections); save the lane again with this ninferd");
    if (get<uint32_t>(b + 12) != kSlotHeaderBytes) refuse("corrupted (header size field)");
    if (get<uint32_t>(b + kHeaderCrcAt) != crc32c_extend(0, b, kHeaderCrcAt)) refuse("corrupted (header checksum)");
    Header h;
    std::memcpy(h.artifact_id.data(), b + 16, 16);
    h.model_id.assign(reinterpret_cast<const char*>(b + 32), strnlen(reinterpret_cast<const char*>(b + 32), kModelIdBytes));
    h.kv_dtype = b[96];
    h.page_tokens = get<uint32_t>(b + 100);
    h.n_tokens = get<uint64_t>(b + 104);
    h.kv_bytes_per_token = get<uint64_t>(b + 112);
    if (h.artifact_id != want.artifact_id || h.model_id != want.model_id)
        refuse("saved by another model (" + h.model_id + ", artifact " + hex(h.artifact_id) + "); this daemon serves " +
               want.model_id + ", artifact " + hex(want.artifact_id));
    if (h.kv_dtype != uint8_t(want.kv_dtype))
        refuse("KV cache dtype " + dtype_text(h.kv_dtype) + " differs from this daemon's " +
               std::string(kv_dtype_name(want.kv_dtype)) + " (restart with --kv-dtype " + dtype_text(h.kv_dtype) + ")");
    if (h.page_tokens != want.page_tokens)
        refuse("KV page size " + std::to_string(h.page_tokens) + " differs from " + std::to_string(want.page_tokens));
    if (h.n_tokens == 0) refuse("holds no tokens");
    if (h.n_tokens > want.max_context)
        refuse(std::to_string(h.n_tokens) + " tokens exceed max-context " + std::to_string(want.max_context));
    if (h.kv_bytes_per_token != want.kv_bytes_per_token)
        refuse("KV bytes per token " + std::to_string(h.kv_bytes_per_token) + " do not match this model's layout (" +
               std::to_string(want.kv_bytes_per_token) + ")");
    uint32_t n_sections = get<uint32_t>(b + 120);
    if (n_sections == 0 || n_sections > kSlotMaxSections)
        refuse("corrupted (" + std::to_string(n_sections) + " sections, at most " + std::to_string(kSlotMaxSections) + ")");
    // n_tokens <= max_context bounds these products; every length is checked against the file
    // size before it is added, so the sum cannot overflow.
    auto expected_length = [&](uint32_t tag) {
        switch (LaneSectionTag(tag)) {
        case LaneSectionTag::Tokens: return h.n_tokens * 4;
        case LaneSectionTag::Kv: return h.n_tokens * want.kv_bytes_per_token;
        case LaneSectionTag::RopePosition: return uint64_t(4);
        default: return want.gdn_bytes;
        }
    };
    uint64_t payload = 0;
    for (uint32_t i = 0; i < n_sections; ++i) {
        const uint8_t* e = b + kDirectoryAt + i * kEntryBytes;
        SectionEntry s{get<uint32_t>(e), get<uint32_t>(e + 4), get<uint64_t>(e + 8), get<uint32_t>(e + 16)};
        std::string name = lane_section_name(s.tag);
        if ((s.flags & ~kFlagRequired) != 0 || get<uint32_t>(e + 20) != 0)
            refuse("corrupted (section " + name + " has unknown flags)");
        for (const SectionEntry& seen : h.sections)
            if (seen.tag == s.tag) refuse("corrupted (two " + name + " sections)");
        if (!is_readable_tag(s.tag) && (s.flags & kFlagRequired))
            refuse("needs the " + name + " section, which this ninferd cannot restore (saved by a newer ninfer?)");
        if (has_fixed_length(s.tag) && s.length != expected_length(s.tag))
            refuse("section " + name + " is " + std::to_string(s.length) + " bytes, this model's layout needs " +
                   std::to_string(expected_length(s.tag)) + " (saved with other settings?)");
        if (s.length > file_bytes - kSlotHeaderBytes - payload)
            refuse("truncated: " + std::to_string(file_bytes) + " bytes, the " + name + " section ends beyond the file");
        payload += s.length;
        h.sections.push_back(s);
    }
    for (LaneSectionTag tag : {LaneSectionTag::Tokens, LaneSectionTag::Kv, LaneSectionTag::Gdn}) {
        bool present = false;
        for (const SectionEntry& s : h.sections) present = present || s.tag == uint32_t(tag);
        if (!present) refuse("corrupted (no " + lane_section_name(uint32_t(tag)) + " section)");
    }
    if (file_bytes > kSlotHeaderBytes + payload)
        refuse("corrupted: " + std::to_string(file_bytes - kSlotHeaderBytes - payload) + " trailing bytes");
    return h;
}

} // namespace

std::string slot_file_path(const std::string& slots_dir, const std::string& name) {
    return slots_dir + "/" + name + ".nslot";
}

std::vector<std::string> slot_file_names(const std::string& slots_dir) {
    constexpr std::string_view kSuffix = ".nslot";
    std::vector<std::string> names;
    if (DIR* d = ::opendir(slots_dir.c_str())) {
        while (dirent* e = ::readdir(d)) {
            std::string_view n = e->d_name;
            if (n.size() > kSuffix.size() && n[0] != '.' && n.ends_with(kSuffix))
                names.emplace_back(n.substr(0, n.size() - kSuffix.size()));
        }
        ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::array<uint8_t, 16> artifact_id_from_hex(const std::string& s) {
    std::array<uint8_t, 16> id{};
    if (s.size() != 32) throw Error("slot: artifact id '" + s + "' is not 32 hex digits");
    for (size_t i = 0; i < 32; ++i) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (v < 0) throw Error("slot: artifact id '" + s + "' is not 32 hex digits");
        id[i / 2] = uint8_t(id[i / 2] | (v << (i % 2 ? 0 : 4)));
    }
    return id;
}

SlotFileStats slot_file_write(const std::string& path, const SlotIdentity& identity, const LaneImage& image,
                              FileIoMode mode) {
    auto t0 = std::chrono::steady_clock::now();
    if (image.tokens.empty()) throw Error("slot: nothing to save (the lane is empty)");
    if (image.sections.size() + 1 > kSlotMaxSections) throw Error("slot: the lane image has too many sections");
    Header h;
    h.artifact_id = identity.artifact_id;
    h.model_id = identity.model_id.substr(0, kModelIdBytes - 1);
    h.kv_dtype = uint8_t(image.kv_dtype);
    h.page_tokens = identity.page_tokens;
    h.n_tokens = image.tokens.size();
    h.kv_bytes_per_token = identity.kv_bytes_per_token;
    h.sections.push_back({uint32_t(LaneSectionTag::Tokens), kFlagRequired, h.n_tokens * 4, 0, image.tokens.data()});
    for (const LaneSection& s : image.sections)
        h.sections.push_back({uint32_t(s.tag), s.required ? kFlagRequired : 0, s.bytes.size(), 0, s.bytes.data()});
    // The media's digests (required: a ninfer that dropped them would match other pixels' tokens).
    const std::vector<uint8_t> media = image.media.empty() ? std::vector<uint8_t>() : media_digests_encode(image.media);
    if (!media.empty())
        h.sections.push_back({uint32_t(LaneSectionTag::MediaDigests), kFlagRequired, media.size(), 0, media.data()});
    std::vector<IoSegment> segments;
    uint64_t at = kSlotHeaderBytes;
    for (SectionEntry& s : h.sections) {
        s.crc = crc32c_extend(0, s.data, s.length);
        segments.push_back(write_segment(s.data, s.length, at));
        at += s.length;
    }
    std::vector<uint8_t> header = encode_header(h);
    segments.insert(segments.begin(), write_segment(header.data(), header.size(), 0));

    AtomicFile file(path);
    file_write_all(file.fd(), segments, mode, file.temp_path());
    file.commit();
    return {h.n_tokens, at, ms_since(t0), mode};
}

LaneImage slot_file_read(const std::string& path, const SlotIdentity& expected, FileIoMode mode, SlotFileStats* stats) {
    auto t0 = std::chrono::steady_clock::now();
    std::string what = "slot file " + path;
    struct stat st;
    FileDescriptor fd = open_regular_file(path, "slot file", &st); // a FIFO would block the I/O thread
    uint64_t file_bytes = uint64_t(st.st_size);
    if (file_bytes < kSlotHeaderBytes)
        throw Error(what + ": truncated: " + std::to_string(file_bytes) + " bytes, shorter than the header");
    std::vector<uint8_t> header(kSlotHeaderBytes);
    IoSegment head[] = {read_segment(header.data(), kSlotHeaderBytes, 0)};
    file_read_all(fd.get(), head, FileIoMode::Plain, path);
    Header h = check_header(header.data(), file_bytes, expected, what);

    // Allocate only what this build restores; unknown optional sections stay unread.
    LaneImage image;
    image.kv_dtype = KvDtype(h.kv_dtype);
    std::vector<IoSegment> body;
    std::vector<std::pair<const SectionEntry*, const void*>> to_check;
    uint64_t at = kSlotHeaderBytes;
    std::vector<uint8_t> media; // MediaDigests, decoded into image.media once its checksum holds
    for (const SectionEntry& s : h.sections) {
        void* out = nullptr;
        if (s.tag == uint32_t(LaneSectionTag::Tokens)) {
            image.tokens.resize(h.n_tokens);
            out = image.tokens.data();
        } else if (s.tag == uint32_t(LaneSectionTag::MediaDigests)) {
            media.resize(s.length);
            out = media.data();
        } else if (is_readable_tag(s.tag)) {
            out = image.add_section(LaneSectionTag(s.tag), s.length, (s.flags & kFlagRequired) != 0).data();
        }
        if (out) {
            body.push_back(read_segment(out, s.length, at));
            to_check.emplace_back(&s, out);
        }
        at += s.length;
    }
    file_read_all(fd.get(), body, mode, path);
    for (auto [s, data] : to_check)
        if (crc32c_extend(0, data, s->length) != s->crc)
            throw Error(what + ": corrupted (" + lane_section_name(s->tag) + " section checksum mismatch)");
    if (!media.empty()) {
        try {
            image.media = media_digests_decode(media);
        } catch (const Error& e) {
            throw Error(what + ": corrupted (" + e.what() + ")");
        }
    }
    if (stats) *stats = {h.n_tokens, file_bytes, ms_since(t0), mode};
    return image;
}

} // namespace ninfer::core
