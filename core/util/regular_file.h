// ninfer::core - opening files by name without ever blocking on one that is not a regular file.
//
// Contract:
// - open_regular_file(path, what) opens read-only with O_NONBLOCK | O_CLOEXEC, so opening a FIFO
//   never waits for a writer (issue 30: a FIFO slot file, key file or artifact used to hang the
//   thread that opened it), checks with fstat that the descriptor is a regular file, then clears
//   O_NONBLOCK so reads behave as usual. A directory, FIFO, socket or device is refused with
//   ninfer::Error("<what>: <path>: not a regular file (a FIFO)") (Errc::Invalid); an open failure
//   throws ninfer::Error("<what>: <path>: <strerror>") of kind errc_of_errno (ENOENT: NotFound).
//   `st`, when given, receives the fstat result.
// - read_regular_file(path, what, max_bytes) returns the whole file's bytes; a file over
//   max_bytes throws ("<what>: <path>: larger than N bytes").
// - read_input_file(path, what) is for a command's own input, which the user may pipe in: "-" is
//   stdin, and a FIFO or character device is read (blocking, as the user asked); a directory or
//   socket is refused like above.
// - FileDescriptor owns one descriptor (move-only; closes it on destruction; -1 = none).
// Thread safety: reentrant.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

struct stat;

namespace ninfer::core {

class FileDescriptor {
  public:
    FileDescriptor() = default;
    explicit FileDescriptor(int fd) : fd_(fd) {}
    FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
    FileDescriptor& operator=(FileDescriptor&& other) noexcept;
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    ~FileDescriptor();

    int get() const { return fd_; }
    int release() noexcept;

  private:
    int fd_ = -1;
};

// "a directory", "a FIFO", "a socket", ... for a st_mode that is not a regular file.
std::string_view file_type_name(unsigned mode);
FileDescriptor open_regular_file(const std::string& path, std::string_view what, struct stat* st = nullptr);
std::string read_regular_file(const std::string& path, std::string_view what, size_t max_bytes = size_t(1) << 30);
std::string read_input_file(const std::string& path, std::string_view what);

} // namespace ninfer::core
