// ninfer::core - large sequential file I/O (io_uring with a pread/pwrite fallback) and crash-safe
// publication (temp file, fsync, rename, directory fsync).
//
// Contract:
// - file_io_mode_default() is Uring unless $NINFER_NO_IO_URING is set to a non-empty value other
//   than "0" or io_uring cannot be set up here (seccomp, io_uring_disabled, old kernel, a build
//   without liburing): then Plain, logged once to stderr by the caller's choice (see
//   file_io_mode_note()).
// - file_write_all / file_read_all move every byte of every segment (QD up to 16 requests of
//   4 MiB in flight with io_uring; short transfers are resubmitted) or throw
//   ninfer::Error("<what>: <path>: <strerror>"). A read that meets end of file throws "truncated".
// - AtomicFile creates `.<name>.tmp.XXXXXX` (mode 0640, O_CLOEXEC) beside the final path. commit()
//   fdatasyncs, renames over the final name and fsyncs the directory; a failure at any step
//   unlinks the temp and throws. Destroying an uncommitted AtomicFile unlinks the temp, so the
//   final name only ever holds the old file or the complete new one. The temp is registered with
//   temp_cleanup (core/util/temp_cleanup.h) until committed or removed, so a tool that installed
//   the signal cleanup (ninferctl) leaves no temp when interrupted.
// - remove_stale_temps(dir, suffix) deletes `.*<suffix>.tmp.*` litter of crashed writers.
// Thread safety: functions are reentrant; each call sets up its own ring (never shared).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace ninfer::core {

enum class FileIoMode : uint8_t { Uring, Plain };

FileIoMode file_io_mode_default();
const char* file_io_mode_name(FileIoMode mode); // "io_uring" or "pwrite"
std::string file_io_mode_note();                // why Plain was chosen ("" for Uring)

struct IoSegment {
    const uint8_t* data; // source (writes)
    uint8_t* out;        // destination (reads)
    uint64_t bytes;
    uint64_t offset;     // file offset
};
inline IoSegment write_segment(const void* data, uint64_t bytes, uint64_t offset) {
    return {static_cast<const uint8_t*>(data), nullptr, bytes, offset};
}
inline IoSegment read_segment(void* out, uint64_t bytes, uint64_t offset) {
    return {nullptr, static_cast<uint8_t*>(out), bytes, offset};
}

void file_write_all(int fd, std::span<const IoSegment> segments, FileIoMode mode, const std::string& path);
void file_read_all(int fd, std::span<const IoSegment> segments, FileIoMode mode, const std::string& path);

// Creates dir (and missing parents) with the given mode; an existing directory is kept.
void make_directories(const std::string& dir, unsigned mode);
void fsync_directory(const std::string& dir);

class AtomicFile {
  public:
    explicit AtomicFile(std::string final_path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    int fd() const { return fd_; }
    const std::string& temp_path() const { return temp_path_; }
    const std::string& final_path() const { return final_path_; }
    void commit(); // fdatasync, close, rename over final_path, fsync the directory

  private:
    std::string final_path_, temp_path_;
    int fd_ = -1;
    int cleanup_slot_ = -1; // core/util/temp_cleanup.h: unlinked if a fatal signal comes first
};

size_t remove_stale_temps(const std::string& dir, const std::string& suffix);

} // namespace ninfer::core
