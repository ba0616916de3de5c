// ninfer::core - synthetic weight generation as a pipeline: one object at a time, in bands of a
// few MiB generated on all threads straight into two reused buffers, each band handed to the sink
// while the next one is generated.
//
// Contract (internal to core/convert, used by synthetic.cpp):
// - SyntheticFiller(seed, n_threads, band_bytes) keeps n_threads-1 worker threads (the caller's
//   thread helps) and two band buffers of band_bytes (rounded up to 8) for its lifetime: peak
//   memory is 2*band_bytes plus, for the few objects that take the float path (K % 128 != 0 or
//   non-matrix inits), one band of f32 values and its encoding; never a whole large object.
// - produce(object, format, sink) hands every byte of the object's encoding to sink exactly once
//   (ObjectSink contract of row_chunks.h), in increasing offset order within each plane. The
//   bytes are a pure function of (seed, object id, format, shape): thread count and band size
//   never change them. Draws are those documented in synthetic.h.
// Thread safety: one producer call at a time; the sink is called on the caller's thread only.
#pragma once

#include "core/convert/plan.h"
#include "core/convert/row_chunks.h"

#include <cstdint>
#include <memory>

namespace ninfer::core {

inline constexpr uint64_t kDefaultSyntheticBandBytes = 8ull << 20;

class SyntheticFiller {
  public:
    SyntheticFiller(uint64_t seed, unsigned n_threads, uint64_t band_bytes = kDefaultSyntheticBandBytes);
    ~SyntheticFiller();
    SyntheticFiller(const SyntheticFiller&) = delete;
    SyntheticFiller& operator=(const SyntheticFiller&) = delete;

    void produce(const PlannedObject& object, TensorFormat format, const ObjectSink& sink);

    struct Impl;

  private:
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::core
