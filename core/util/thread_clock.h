// ninfer::core - the calling thread's CPU time, for figures of work done (not of waiting): a
// thread that shares its core under load reads the same as on an idle machine.
//
// Contract: thread_cpu_us() is the calling thread's user + system CPU time in microseconds
// (CLOCK_THREAD_CPUTIME_ID), monotonic per thread; differences are only meaningful on one thread.
// About a few hundred nanoseconds a call: take it per step or per batch, not per token.
#pragma once

#include <cstdint>
#include <ctime>

namespace ninfer::core {

inline uint64_t thread_cpu_us() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000u + uint64_t(ts.tv_nsec) / 1000u;
}

} // namespace ninfer::core
