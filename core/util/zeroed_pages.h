// ninfer::core - ZeroedPageAllocator: a std::vector allocator for large host buffers that are
// written once, in bulk, by another producer (lane images filled from the GPU's staging buffers).
//
// Contract:
// - allocate(n) returns zeroed memory: n bytes >= kHugeRegionBytes come from their own anonymous
//   mapping (the kernel's zero pages), rounded up to whole 2 MiB pages and advised
//   MADV_HUGEPAGE, so the first write faults once per 2 MiB instead of once per 4 KiB where
//   transparent huge pages are enabled in `madvise` or `always` mode (Ubuntu's and Debian's
//   default), and falls back to 4 KiB pages silently elsewhere; smaller requests use calloc.
//   Throws std::bad_alloc when the memory cannot be had.
// - construct() without arguments does nothing, so vector::resize(n) of a fresh vector costs no
//   pass over the bytes: the memory is already zero. A vector shrunk and grown again within its
//   capacity therefore keeps the old bytes instead of zeros: size such vectors once (LaneSection
//   does), or assign() them.
// - Two allocators always compare equal (stateless); vectors using it move in O(1).
// Why: a checkpoint of the 27B is ~150 MiB of GDN state plus its KV rows. With std::vector's
// value-initialising resize and 4 KiB faults, the host side of each copy ran at ~1.4 GB/s on the
// serving benchmark's H100 host (fault + zero + copy), so saves queued behind each other and
// stalled the engine thread (kernels/PERF_NOTES.md, session 18).
// Thread safety: stateless; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <sys/mman.h>
#include <type_traits>
#include <utility>

namespace ninfer::core {

inline constexpr size_t kHugeRegionBytes = size_t(2) << 20; // one x86-64 huge page

// bytes (or an address) rounded up to a whole number of huge pages.
inline size_t huge_region_size(size_t bytes) {
    return (bytes + kHugeRegionBytes - 1) / kHugeRegionBytes * kHugeRegionBytes;
}

template <class T> struct ZeroedPageAllocator {
    static_assert(std::is_trivially_copyable_v<T>, "ZeroedPageAllocator holds plain bytes and numbers");
    using value_type = T;
    ZeroedPageAllocator() = default;
    template <class U> ZeroedPageAllocator(const ZeroedPageAllocator<U>&) noexcept {}

    T* allocate(size_t n) {
        if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
        const size_t bytes = n * sizeof(T);
        if (bytes < kHugeRegionBytes) {
            void* p = std::calloc(n ? n : 1, sizeof(T));
            if (!p) throw std::bad_alloc();
            return static_cast<T*>(p);
        }
        // Over-map by one huge page so the region can start on a 2 MiB boundary (huge pages need
        // it), then return the unused head and tail.
        const size_t size = huge_region_size(bytes);
        void* raw = ::mmap(nullptr, size + kHugeRegionBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) throw std::bad_alloc();
        const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
        const uintptr_t aligned = huge_region_size(start);
        if (aligned > start) ::munmap(raw, aligned - start);
        const size_t tail = start + size + kHugeRegionBytes - (aligned + size);
        if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + size), tail);
        ::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE); // advice: ignored where THP is off
        return reinterpret_cast<T*>(aligned);
    }

    void deallocate(T* p, size_t n) noexcept {
        const size_t bytes = n * sizeof(T);
        if (bytes < kHugeRegionBytes)
            std::free(p);
        else
            ::munmap(p, huge_region_size(bytes));
    }

    template <class U> void construct(U*) noexcept {} // the memory is zero already
    template <class U, class... Args> void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }

    template <class U> bool operator==(const ZeroedPageAllocator<U>&) const noexcept { return true; }
};

} // namespace ninfer::core
