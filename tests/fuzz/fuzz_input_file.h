// ninfer fuzz - the fuzz input as a named regular file, for readers that take a path.
//
// Contract: InputFile() creates one anonymous in-memory file (memfd, no disk I/O) per process;
// write(data, n) replaces its content and returns a path (/proc/self/fd/N) that opens it as a
// regular file, so open_regular_file's checks and mmap behave as with a file on disk.
// Single-threaded use (libFuzzer calls one input at a time).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace ninfer::fuzz {

class InputFile {
  public:
    InputFile() : fd_(memfd_create("ninfer-fuzz-input", MFD_CLOEXEC)) {
        if (fd_ < 0) abort();
        path_ = "/proc/self/fd/" + std::to_string(fd_);
    }
    const std::string& write(const uint8_t* data, size_t n) {
        if (ftruncate(fd_, 0) != 0) abort();
        for (size_t done = 0; done < n;) {
            ssize_t w = pwrite(fd_, data + done, n - done, off_t(done));
            if (w <= 0) abort();
            done += size_t(w);
        }
        return path_;
    }

  private:
    int fd_;
    std::string path_;
};

} // namespace ninfer::fuzz
