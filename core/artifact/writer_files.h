// ninfer::core - the file side of the artifact writer: temp files, sharding plan, publication.
//
// Contract (internal to core/artifact):
// - plan_segments(entry_path, E, T, L) splits the logical payload [0,T) into the entry and part
//   files per docs/ARTIFACT_FORMAT.md §1.3's sharding policy (one file if E+T <= L). Segment 0 is
//   the entry (name = the entry's filename), segment i>=1 is "<entry filename>.part-%04d". Throws
//   if L is too small to hold a positive payload per file.
// - WriterFiles(path, force, payload_base) refuses an existing target unless force and creates the
//   payload temp file `.<name>.XXXXXX.tmp` in the target directory. write_payload(offset, ...)
//   writes the logical payload at its offset (gaps read as zeros), `payload_base` bytes into the
//   temp (a multiple of 4096: room left for the entry header).
// - The entry file is the payload temp itself: when E == payload_base the header is written into
//   the room in front, else E - payload_base bytes are inserted (or removed) in front with
//   fallocate, else (filesystems without INSERT/COLLAPSE_RANGE, such as tmpfs) the payload is
//   copied once behind a fresh header.
// - publish(json, segs, T) builds every file (headers, directory, payload), checks each length,
//   fdatasyncs, and publishes parts first, entry last (hard link, or rename when force), then
//   fsyncs the directory. Returns the bytes of all files. On error everything it created,
//   published names included, is removed (abandon()), as is the case on destruction before publish.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::core::detail {

struct FileSegment {
    std::string name; // file name inside the entry's directory
    uint64_t payload_begin = 0, payload_bytes = 0;
};

std::vector<FileSegment> plan_segments(const std::string& entry_path, uint64_t entry_payload_start,
                                       uint64_t total, uint64_t file_size_limit);

class WriterFiles {
  public:
    WriterFiles(const std::string& path, bool force, uint64_t payload_base = 0);
    ~WriterFiles();
    WriterFiles(const WriterFiles&) = delete;
    WriterFiles& operator=(const WriterFiles&) = delete;

    void write_payload(uint64_t offset, const uint8_t* data, uint64_t n);
    uint64_t publish(const std::string& json, const std::vector<FileSegment>& segs, uint64_t total);
    void abandon() noexcept;

  private:
    struct Temp {
        std::string path;
        int fd = -1;
        int cleanup_slot = -1; // core/util/temp_cleanup.h: unlinked if a fatal signal comes first
    };
    Temp make_temp();
    [[noreturn]] void fail(const std::string& msg) const;

    std::string path_, dir_, base_;
    bool force_;
    uint64_t base_offset_ = 0;
    Temp data_;
    std::vector<Temp> temps_;           // every temp created (closed/unlinked on abandon)
    std::vector<std::string> published_; // final names created by publish()
    bool done_ = false;
};

} // namespace ninfer::core::detail
