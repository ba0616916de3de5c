// ninfer::core - artifact writer files: temps in the target dir, part split, fsync, link publication.
#include "core/artifact/writer_files.h"

#include "core/util/error.h"
#include "core/util/temp_cleanup.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ninfer::core::detail {
namespace {

constexpr uint8_t kEntryMagic[8] = {'N', 'I', 'N', 'F', 'E', 'R', 0, 3};
constexpr uint8_t kPartMagic[8] = {'N', 'I', 'N', 'P', 'R', 'T', 0, 3};

bool path_exists(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0;
}

void put_u64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i)
        p[i] = uint8_t(v >> (8 * i));
}

} // namespace

std::vector<FileSegment> plan_segments(const std::string& entry_path, uint64_t e, uint64_t total,
                                       uint64_t limit) {
    const std::string name = entry_path.substr(entry_path.find_last_of('/') + 1);
    if (e <= limit && total <= limit - e)
        return {FileSegment{name, 0, total}};
    const uint64_t b0 = limit > e ? (limit - e) / 4096 * 4096 : 0;
    const uint64_t c = limit > 4096 ? (limit - 4096) / 4096 * 4096 : 0;
    if (b0 == 0 || c == 0)
        throw Error("artifact writer: " + entry_path + ": file_size_limit " + std::to_string(limit) +
                    " cannot hold the " + std::to_string(e) + "-byte header plus payload");
    std::vector<FileSegment> segs{{name, 0, b0}};
    for (uint64_t at = b0; at < total; at += c) {
        char suffix[32];
        std::snprintf(suffix, sizeof suffix, ".part-%04zu", segs.size());
        segs.push_back({name + suffix, at, std::min(c, total - at)});
    }
    return segs;
}

WriterFiles::WriterFiles(const std::string& path, bool force, uint64_t payload_base)
    : path_(path), force_(force), base_offset_(payload_base) {
    if (payload_base % 4096 != 0)
        fail("payload base " + std::to_string(payload_base) + " is not a multiple of 4096");
    const size_t slash = path.find_last_of('/');
    dir_ = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    base_ = slash == std::string::npos ? path : path.substr(slash + 1);
    if (base_.empty())
        fail("target must name a file");
    if (!force_ && path_exists(path_))
        fail("target exists (use --force to replace it)");
    data_ = make_temp();
}

WriterFiles::~WriterFiles() {
    if (!done_)
        abandon();
}

void WriterFiles::fail(const std::string& msg) const {
    throw Error("artifact writer: " + path_ + ": " + msg);
}

WriterFiles::Temp WriterFiles::make_temp() {
    std::string tmpl = dir_ + "/." + base_ + ".XXXXXX.tmp";
    int fd = ::mkstemps(tmpl.data(), 4);
    if (fd < 0)
        fail("cannot create a temp file in " + dir_ + ": " + std::strerror(errno));
    ::fchmod(fd, 0644);
    temps_.push_back({tmpl, fd, temp_cleanup_register(tmpl)});
    return temps_.back();
}

void WriterFiles::write_payload(uint64_t offset, const uint8_t* data, uint64_t n) {
    while (n > 0) {
        ssize_t w = ::pwrite(data_.fd, data, std::min<uint64_t>(n, 1u << 30), off_t(base_offset_ + offset));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            fail(std::string("writing payload: ") + std::strerror(errno));
        data += w, offset += uint64_t(w), n -= uint64_t(w);
    }
}

namespace {

void write_all(int fd, uint64_t offset, const uint8_t* p, uint64_t n) {
    while (n > 0) {
        ssize_t w = ::pwrite(fd, p, std::min<uint64_t>(n, 1u << 30), off_t(offset));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            throw Error(std::string("write failed: ") + std::strerror(errno));
        p += w, offset += uint64_t(w), n -= uint64_t(w);
    }
}

// Copies [src_off, src_off+n) of `in` to `out` at dst_off, in the kernel where possible.
void copy_range(int in, uint64_t src_off, int out, uint64_t dst_off, uint64_t n) {
    loff_t a = loff_t(src_off), b = loff_t(dst_off);
    while (n > 0) {
        ssize_t c = ::copy_file_range(in, &a, out, &b, std::min<uint64_t>(n, 1u << 30), 0);
        if (c < 0 && errno == EINTR)
            continue;
        if (c <= 0)
            break;
        n -= uint64_t(c);
    }
    std::vector<uint8_t> buf(n ? std::min<uint64_t>(n, 8u << 20) : 0);
    while (n > 0) {
        ssize_t r = ::pread(in, buf.data(), std::min<uint64_t>(n, buf.size()), a);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            throw Error(std::string("copying payload: ") + (r == 0 ? "unexpected end of file" : std::strerror(errno)));
        write_all(out, uint64_t(b), buf.data(), uint64_t(r));
        a += r, b += r, n -= uint64_t(r);
    }
}

uint64_t file_size(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        throw Error(std::string("fstat failed: ") + std::strerror(errno));
    return uint64_t(st.st_size);
}

} // namespace

uint64_t WriterFiles::publish(const std::string& json, const std::vector<FileSegment>& segs,
                              uint64_t total) {
    try {
        const uint64_t e = 32 + json.size();
        if (e % 4096 != 0)
            fail("directory is not padded to a 4096-byte boundary");
        std::vector<std::string> finals;
        for (const FileSegment& s : segs)
            finals.push_back(dir_ + "/" + s.name);
        if (!force_)
            for (const std::string& f : finals)
                if (path_exists(f))
                    fail("target " + f + " exists (use --force to replace it)");
        if (file_size(data_.fd) != base_offset_ + total)
            fail("payload temp holds " + std::to_string(file_size(data_.fd) - base_offset_) +
                 " payload bytes; expected " + std::to_string(total));

        std::array<uint8_t, 16> id{};
        if (::getrandom(id.data(), id.size(), 0) != ssize_t(id.size()))
            fail("getrandom failed");

        // Parts first: header page, then their slice of the payload.
        std::vector<Temp> files(segs.size());
        for (size_t i = 1; i < segs.size(); ++i) {
            files[i] = make_temp();
            std::array<uint8_t, 4096> head{};
            std::memcpy(head.data(), kPartMagic, 8);
            put_u64(head.data() + 8, i);
            std::memcpy(head.data() + 16, id.data(), 16);
            write_all(files[i].fd, 0, head.data(), head.size());
            copy_range(data_.fd, base_offset_ + segs[i].payload_begin, files[i].fd, 4096, segs[i].payload_bytes);
        }
        // Entry: the payload temp itself when the room in front is E bytes or the filesystem can
        // make it so (no payload copy), else a fresh temp with the payload copied behind the header.
        const uint64_t b0 = segs[0].payload_bytes;
        if (::ftruncate(data_.fd, off_t(base_offset_ + b0)) != 0)
            fail(std::string("truncating payload: ") + std::strerror(errno));
        const bool in_place =
            e == base_offset_ ||
            (e > base_offset_ && ::fallocate(data_.fd, FALLOC_FL_INSERT_RANGE, 0, off_t(e - base_offset_)) == 0) ||
            (e < base_offset_ && ::fallocate(data_.fd, FALLOC_FL_COLLAPSE_RANGE, 0, off_t(base_offset_ - e)) == 0);
        if (in_place) {
            files[0] = data_;
        } else {
            files[0] = make_temp();
            copy_range(data_.fd, base_offset_, files[0].fd, e, b0);
        }
        std::vector<uint8_t> head(32);
        std::memcpy(head.data(), kEntryMagic, 8);
        put_u64(head.data() + 8, json.size());
        std::memcpy(head.data() + 16, id.data(), 16);
        write_all(files[0].fd, 0, head.data(), head.size());
        write_all(files[0].fd, 32, reinterpret_cast<const uint8_t*>(json.data()), json.size());

        uint64_t written = 0;
        for (size_t i = 0; i < segs.size(); ++i) {
            const uint64_t want = (i == 0 ? e : 4096) + segs[i].payload_bytes;
            const uint64_t got = file_size(files[i].fd);
            if (got != want)
                fail("file " + segs[i].name + " is " + std::to_string(got) + " bytes; expected " +
                     std::to_string(want));
            if (::fdatasync(files[i].fd) != 0)
                fail(std::string("fdatasync failed: ") + std::strerror(errno));
            written += want;
        }
        // Publish parts 1..n-1, then the entry, so a visible entry always has its parts.
        for (size_t k = 0; k < segs.size(); ++k) {
            const size_t i = (k + 1) % segs.size();
            if (force_) {
                if (::rename(files[i].path.c_str(), finals[i].c_str()) != 0)
                    fail("publishing " + finals[i] + ": " + std::strerror(errno));
                files[i].path.clear();
            } else if (::link(files[i].path.c_str(), finals[i].c_str()) != 0) {
                fail("publishing " + finals[i] + ": " + std::strerror(errno));
            }
            published_.push_back(finals[i]);
            for (Temp& t : temps_)
                if (t.fd == files[i].fd)
                    t.path = files[i].path; // renamed temps have nothing left to unlink
        }
        for (Temp& t : temps_) {
            if (!t.path.empty())
                ::unlink(t.path.c_str());
            if (t.fd >= 0)
                ::close(t.fd);
            temp_cleanup_unregister(t.cleanup_slot);
            t = Temp{};
        }
        int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            ::fsync(dfd);
            ::close(dfd);
        }
        done_ = true;
        return written;
    } catch (const Error& err) {
        abandon();
        const std::string msg = err.what();
        if (msg.rfind("artifact writer: ", 0) == 0)
            throw;
        fail(msg);
    }
}

void WriterFiles::abandon() noexcept {
    for (Temp& t : temps_) {
        if (t.fd >= 0)
            ::close(t.fd);
        if (!t.path.empty())
            ::unlink(t.path.c_str());
        temp_cleanup_unregister(t.cleanup_slot);
        t = Temp{};
    }
    for (const std::string& p : published_)
        ::unlink(p.c_str());
    published_.clear();
    done_ = true;
}

} // namespace ninfer::core::detail
