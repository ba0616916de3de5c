// ninfer::core - io_uring / pread-pwrite segment I/O and crash-safe temp-file publication.
#include "core/util/file_io.h"

#include "core/util/error.h"
#include "core/util/temp_cleanup.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dirent.h>
#include <fcntl.h>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#if NINFER_HAVE_LIBURING
#include <liburing.h>
#endif

namespace ninfer::core {
namespace {

constexpr uint64_t kChunkBytes = 4ull << 20;
constexpr unsigned kQueueDepth = 16;

[[noreturn]] void fail(const char* what, const std::string& path, int err) {
    throw Error(errc_of_errno(err), std::string(what) + ": " + path + ": " + std::strerror(err));
}

struct ProbeResult {
    FileIoMode mode = FileIoMode::Plain;
    std::string note;
};

ProbeResult probe() {
    const char* env = std::getenv("NINFER_NO_IO_URING");
    if (env && *env && std::string_view(env) != "0")
        return {FileIoMode::Plain, "io_uring disabled by NINFER_NO_IO_URING"};
#if NINFER_HAVE_LIBURING
    io_uring ring;
    int rc = io_uring_queue_init(4, &ring, 0);
    if (rc < 0) return {FileIoMode::Plain, std::string("io_uring unavailable (") + std::strerror(-rc) + ")"};
    io_uring_queue_exit(&ring);
    return {FileIoMode::Uring, ""};
#else
    return {FileIoMode::Plain, "built without liburing"};
#endif
}

const ProbeResult& probed() {
    static const ProbeResult r = probe();
    return r;
}

// One transfer of at most kChunkBytes, resubmitted until done.
struct Piece {
    const IoSegment* seg;
    uint64_t done, bytes, base; // base = offset inside the segment
};

std::vector<Piece> split(std::span<const IoSegment> segments) {
    std::vector<Piece> pieces;
    for (const IoSegment& s : segments)
        for (uint64_t at = 0; at < s.bytes; at += kChunkBytes)
            pieces.push_back({&s, 0, std::min(kChunkBytes, s.bytes - at), at});
    return pieces;
}

void plain_transfer(int fd, std::span<const IoSegment> segments, bool write, const std::string& path) {
    for (Piece p : split(segments)) {
        while (p.done < p.bytes) {
            uint64_t at = p.base + p.done;
            size_t n = size_t(p.bytes - p.done);
            off_t off = off_t(p.seg->offset + at);
            ssize_t r = write ? ::pwrite(fd, p.seg->data + at, n, off) : ::pread(fd, p.seg->out + at, n, off);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) fail(write ? "write" : "read", path, errno);
            if (r == 0) throw Error(Errc::Io, std::string(write ? "write" : "read") + ": " + path + ": truncated");
            p.done += uint64_t(r);
        }
    }
}

#if NINFER_HAVE_LIBURING
void uring_transfer(int fd, std::span<const IoSegment> segments, bool write, const std::string& path) {
    io_uring ring;
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN;
    int rc = io_uring_queue_init_params(kQueueDepth * 2, &ring, &params);
    if (rc == -EINVAL) {
        params = {};
        rc = io_uring_queue_init_params(kQueueDepth * 2, &ring, &params);
    }
    if (rc < 0) return plain_transfer(fd, segments, write, path); // e.g. ENOMEM under a memlock limit
    std::vector<Piece> pieces = split(segments);
    std::deque<Piece*> todo;
    for (Piece& p : pieces) todo.push_back(&p);
    unsigned in_flight = 0;
    int error = 0;
    bool eof = false;
    while ((!todo.empty() && !error && !eof) || in_flight > 0) {
        while (!todo.empty() && in_flight < kQueueDepth && !error && !eof) {
            Piece* p = todo.front();
            todo.pop_front();
            io_uring_sqe* sqe = io_uring_get_sqe(&ring);
            uint64_t at = p->base + p->done;
            unsigned n = unsigned(p->bytes - p->done);
            if (write)
                io_uring_prep_write(sqe, fd, p->seg->data + at, n, p->seg->offset + at);
            else
                io_uring_prep_read(sqe, fd, p->seg->out + at, n, p->seg->offset + at);
            io_uring_sqe_set_data(sqe, p);
            ++in_flight;
        }
        io_uring_submit(&ring);
        io_uring_cqe* cqe = nullptr;
        rc = io_uring_wait_cqe(&ring, &cqe);
        if (rc == -EINTR) continue;
        if (rc < 0) {
            error = -rc;
            break; // cannot reap: the ring is torn down below, which waits for in-flight requests
        }
        Piece* p = static_cast<Piece*>(io_uring_cqe_get_data(cqe));
        int res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        --in_flight;
        if (res == -EINTR || res == -EAGAIN) {
            todo.push_front(p);
        } else if (res < 0) {
            error = -res;
        } else if (res == 0) {
            eof = true;
        } else {
            p->done += uint64_t(res);
            if (p->done < p->bytes) todo.push_front(p); // short transfer: resubmit the rest
        }
    }
    io_uring_queue_exit(&ring);
    if (error) fail(write ? "write" : "read", path, error);
    if (eof) throw Error(Errc::Io, std::string(write ? "write" : "read") + ": " + path + ": truncated");
}
#endif

void transfer(int fd, std::span<const IoSegment> segments, FileIoMode mode, bool write, const std::string& path) {
#if NINFER_HAVE_LIBURING
    if (mode == FileIoMode::Uring) return uring_transfer(fd, segments, write, path);
#endif
    plain_transfer(fd, segments, write, path);
}

std::string directory_of(const std::string& path) {
    size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

FileIoMode file_io_mode_default() { return probed().mode; }
std::string file_io_mode_note() { return probed().note; }
const char* file_io_mode_name(FileIoMode mode) { return mode == FileIoMode::Uring ? "io_uring" : "pwrite"; }

void file_write_all(int fd, std::span<const IoSegment> segments, FileIoMode mode, const std::string& path) {
    transfer(fd, segments, mode, true, path);
}

void file_read_all(int fd, std::span<const IoSegment> segments, FileIoMode mode, const std::string& path) {
    transfer(fd, segments, mode, false, path);
}

void make_directories(const std::string& dir, unsigned mode) {
    if (dir.empty()) return;
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode)) throw Error("mkdir: " + dir + ": exists and is not a directory");
        return;
    }
    std::string parent = directory_of(dir);
    if (parent != dir) make_directories(parent, mode);
    if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) fail("mkdir", dir, errno);
    ::chmod(dir.c_str(), mode); // the umask must not widen or narrow what the caller asked for
}

void fsync_directory(const std::string& dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail("open directory", dir, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) fail("fsync directory", dir, err);
}

AtomicFile::AtomicFile(std::string final_path) : final_path_(std::move(final_path)) {
    std::string templ = directory_of(final_path_) + "/." + base_name(final_path_) + ".tmp.XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    fd_ = ::mkostemp(buf.data(), O_CLOEXEC);
    if (fd_ < 0) fail("create", templ, errno);
    temp_path_ = buf.data();
    cleanup_slot_ = temp_cleanup_register(temp_path_);
    ::fchmod(fd_, 0640);
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
    temp_cleanup_unregister(cleanup_slot_);
}

void AtomicFile::commit() {
    if (::fdatasync(fd_) != 0) fail("fsync", temp_path_, errno);
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) fail("close", temp_path_, errno);
    if (std::getenv("NINFER_FAULT") && std::string_view(std::getenv("NINFER_FAULT")) == "before_rename")
        std::abort(); // fault injection for crash tests: the temp is complete, the rename never happens
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) fail("rename", final_path_, errno);
    temp_path_.clear();
    temp_cleanup_unregister(cleanup_slot_);
    cleanup_slot_ = -1;
    fsync_directory(directory_of(final_path_));
}

size_t remove_stale_temps(const std::string& dir, const std::string& suffix) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return 0;
    size_t removed = 0;
    std::string marker = suffix + ".tmp.";
    while (dirent* e = ::readdir(d)) {
        std::string_view name(e->d_name);
        if (name.size() > 1 && name[0] == '.' && name.find(marker) != std::string_view::npos &&
            ::unlinkat(::dirfd(d), e->d_name, 0) == 0)
            ++removed;
    }
    ::closedir(d);
    return removed;
}

} // namespace ninfer::core
