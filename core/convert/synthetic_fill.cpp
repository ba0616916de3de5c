// ninfer::core - seeded synthetic weights generated band by band on a thread pool, double-buffered.
#include "core/convert/synthetic_fill.h"

#include "core/formats/codec.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ninfer::core {
namespace {

constexpr double kInitStd = 0.02;
// Unit of seeding: every 4 MiB of a region has its own stream, so bytes never depend on how the
// work is split (bands and thread parts only choose where to start inside a stream).
constexpr uint64_t kChunkBytes = 4ull << 20;
constexpr uint64_t kMinPartBytes = 256ull << 10; // below this a band is one task

uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t hash_text(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s)
        h = (h ^ c) * 0x100000001b3ull;
    return h;
}

// wyrand: one multiply per 64 random bits. Its state advances by a constant per draw, so a
// stream can be entered at any draw index (skip), which is what lets bands run in parallel.
struct Rng {
    static constexpr uint64_t kStep = 0xa0761d6478bd642full;
    uint64_t s;
    uint64_t next() {
        s += kStep;
        __uint128_t t = __uint128_t(s) * (s ^ 0xe7037ed1a0b428dbull);
        return uint64_t(t >> 64) ^ uint64_t(t);
    }
    Rng skip(uint64_t draws) const { return Rng{s + draws * kStep}; }
    double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
};

Rng stream(uint64_t seed, uint64_t object_hash, uint64_t region, uint64_t chunk) {
    return Rng{splitmix(splitmix(splitmix(seed ^ object_hash) + region) + chunk)};
}

double inverse_normal(double p) {
    double lo = -10, hi = 10;
    for (int i = 0; i < 100; ++i) {
        double mid = 0.5 * (lo + hi);
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

int sign_extend(unsigned u, int bits) { return u >= (1u << (bits - 1)) ? int(u) - (1 << bits) : int(u); }

// Byte tables map a uniform random byte to an encoded byte with a zero-mean code distribution.
struct Tables {
    uint8_t q4[256], q56[256], q8[256], fp8[256];
    std::vector<uint16_t> bf16;  // 65536 N(0, kInitStd) quantiles
    std::vector<float> normal;   // 65536 N(0, 1) quantiles
    double std_q4 = 0, std_q5 = 0, std_q6 = 0, std_q8 = 0, std_fp8 = 0;

    Tables() : bf16(65536), normal(65536) {
        for (size_t i = 0; i < 65536; ++i) {
            normal[i] = float(inverse_normal((double(i) + 0.5) / 65536.0));
            bf16[i] = f32_to_bf16(float(normal[i] * kInitStd));
        }
        // q4: nibbles 0..15 with -8 replaced by 0. q5/q6: low nibbles symmetric around 8 (0
        // replaced by 8), which makes {L, L-16} and {L, L+16, L-32, L-16} symmetric around 0.
        unsigned n4[16], n56[16];
        for (unsigned i = 0; i < 16; ++i) {
            n4[i] = i == 8 ? 0 : i;
            n56[i] = i == 0 ? 8 : i;
        }
        double s4 = 0, s5 = 0, s6 = 0, s8 = 0, sf = 0;
        for (unsigned i = 0; i < 16; ++i) {
            double c4 = sign_extend(n4[i], 4), l = n56[i];
            s4 += c4 * c4 / 16;
            s5 += (l * l + (l - 16) * (l - 16)) / 32;
            s6 += (l * l + (l + 16) * (l + 16) + (l - 32) * (l - 32) + (l - 16) * (l - 16)) / 64;
        }
        for (unsigned b = 0; b < 256; ++b) {
            q4[b] = uint8_t(n4[b & 15] | (n4[b >> 4] << 4));
            q56[b] = uint8_t(n56[b & 15] | (n56[b >> 4] << 4));
            q8[b] = b == 0x80 ? 0 : uint8_t(b);
            s8 += double(int8_t(q8[b])) * int8_t(q8[b]) / 256;
            fp8[b] = f32_to_e4m3(float(inverse_normal((b + 0.5) / 256.0) * 32.0));
            double v = e4m3_to_f32(fp8[b]);
            sf += v * v / 256;
        }
        std_q4 = std::sqrt(s4), std_q5 = std::sqrt(s5), std_q6 = std::sqrt(s6);
        std_q8 = std::sqrt(s8), std_fp8 = std::sqrt(sf);
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

// One contiguous range of an object's encoding and how its bytes are made.
struct Piece {
    enum Kind { TableBytes, RandomBytes, Bf16Words, Const16, ConstByte } kind;
    uint64_t offset, bytes; // within the object
    uint64_t region = 0;    // seeding id of a random piece
    const uint8_t* table = nullptr;
    uint16_t word = 0;
    uint8_t byte = 0;
    bool random() const { return kind == TableBytes || kind == RandomBytes || kind == Bf16Words; }
};

// Fills n bytes starting `at` bytes into a random piece. `at` is a multiple of 8; only the
// piece's last bytes can be a partial word, and those are zero.
void fill_random(const Piece& p, uint64_t seed, uint64_t object_hash, uint64_t at, uint64_t n, uint8_t* out) {
    const Tables& t = tables();
    const uint64_t end = at + n;
    while (at < end) {
        const uint64_t chunk = at / kChunkBytes;
        const uint64_t stop = std::min(end, std::min((chunk + 1) * kChunkBytes, p.bytes));
        Rng rng = stream(seed, object_hash, p.region, chunk).skip((at - chunk * kChunkBytes) / 8);
        uint8_t* q = out;
        const uint64_t words = (stop - at) / 8;
        if (p.kind == Piece::Bf16Words) {
            for (uint64_t w = 0; w < words; ++w, q += 8) {
                uint64_t x = rng.next();
                for (int j = 0; j < 4; ++j) {
                    uint16_t v = t.bf16[(x >> (16 * j)) & 0xffff];
                    std::memcpy(q + 2 * j, &v, 2);
                }
            }
        } else if (p.kind == Piece::RandomBytes) {
            for (uint64_t w = 0; w < words; ++w, q += 8) {
                uint64_t x = rng.next();
                std::memcpy(q, &x, 8);
            }
        } else {
            for (uint64_t w = 0; w < words; ++w, q += 8) {
                uint64_t x = rng.next();
                for (int j = 0; j < 8; ++j)
                    q[j] = p.table[(x >> (8 * j)) & 0xff];
            }
        }
        std::memset(q, 0, (stop - at) % 8);
        out += stop - at;
        at = stop;
    }
}

void fill_piece(const Piece& p, uint64_t seed, uint64_t object_hash, uint64_t at, uint64_t n, uint8_t* out) {
    if (p.random())
        return fill_random(p, seed, object_hash, at, n, out);
    if (p.kind == Piece::ConstByte)
        return (void)std::memset(out, p.byte, n);
    for (uint64_t i = 0; i + 2 <= n; i += 2)
        std::memcpy(out + i, &p.word, 2);
}

// The pieces of a rank-2 Matrix-init object whose codes and scales are drawn directly, or an
// empty list when the object needs the float path (K padding, which that path handles canonically).
std::vector<Piece> direct_pieces(const PlannedObject& o, TensorFormat f, std::array<uint8_t, 4>& divisor) {
    const Tables& t = tables();
    const uint64_t n = o.shape[0], k = o.shape[1];
    switch (f) {
    case TensorFormat::Bf16:
        return {{Piece::Bf16Words, 0, n * k * 2}};
    case TensorFormat::Fp8E4m3fnRowBf16: {
        RowScaleGeometry g = row_scale_geometry(n, k);
        Piece scales{Piece::Const16, g.scale_off, 2 * n};
        scales.word = f32_to_bf16(float(kInitStd / t.std_fp8));
        return {{Piece::TableBytes, 0, n * k, 0, t.fp8}, scales};
    }
    case TensorFormat::Nvfp4: {
        // E2M1 magnitudes {0,.5,1,1.5,2,3,4,6} have RMS sqrt(68.5/8); the divisor sets the std.
        Nvfp4Geometry g = nvfp4_geometry(n, k);
        Piece scales{Piece::ConstByte, g.scale_off, g.scale_bytes};
        scales.byte = f32_to_e4m3(0.4375f);
        float d = float(std::sqrt(68.5 / 8) * e4m3_to_f32(scales.byte) / kInitStd);
        std::memcpy(divisor.data(), &d, 4);
        return {{Piece::RandomBytes, 0, g.code_bytes}, scales};
    }
    default: break;
    }
    if (k % 128 != 0)
        return {};
    RowSplitGeometry g = row_split_geometry(f, n, k);
    const uint8_t* table = f == TensorFormat::Q4G64Fp16 ? t.q4 : f == TensorFormat::Q8G32Fp16 ? t.q8 : t.q56;
    double code_std = f == TensorFormat::Q4G64Fp16   ? t.std_q4
                      : f == TensorFormat::Q5G64Fp16 ? t.std_q5
                      : f == TensorFormat::Q6G64Fp16 ? t.std_q6
                                                     : t.std_q8;
    std::vector<Piece> pieces = {{Piece::TableBytes, 0, n * g.base_row, 0, table}};
    if (g.high_row)
        pieces.push_back({Piece::RandomBytes, g.high_off, n * g.high_row, 1});
    Piece scales{Piece::Const16, g.scale_off, n * g.groups_per_row * 2};
    scales.word = f32_to_f16(float(kInitStd / code_std));
    pieces.push_back(scales);
    return pieces;
}

float draw(SyntheticInit init, Rng& rng) {
    const std::vector<float>& normal = tables().normal;
    auto gauss = [&] { return double(normal[rng.next() & 0xffff]); };
    switch (init) {
    case SyntheticInit::Matrix: return float(gauss() * kInitStd);
    case SyntheticInit::OffsetNorm: return float(gauss() * 0.05);
    case SyntheticInit::GatedNorm:
    case SyntheticInit::LayerNorm: return float(1.0 + gauss() * 0.05);
    case SyntheticInit::Bias: return float(gauss() * 0.01);
    case SyntheticInit::ALog: return float(std::log(1.0 + 15.0 * rng.uniform()));
    case SyntheticInit::DtBias: {
        double dt = std::exp(std::log(1e-3) + rng.uniform() * (std::log(1e-1) - std::log(1e-3)));
        return float(dt + std::log(-std::expm1(-dt))); // softplus^-1
    }
    case SyntheticInit::Conv: return float(rng.uniform() - 0.5);
    }
    return 0;
}

// Runs the parts of one job on the workers and, once the caller joins (finish), on the caller
// too. Parts are handed out under the lock, so a late worker can never take a part of the
// next job with the previous job's function.
class Pool {
  public:
    explicit Pool(unsigned workers) {
        for (unsigned i = 0; i < workers; ++i)
            threads_.emplace_back([this] { loop(); });
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> lock(m_);
            stop_ = true;
        }
        work_.notify_all();
        for (std::thread& t : threads_)
            t.join();
    }
    unsigned threads() const { return unsigned(threads_.size()) + 1; }

    void start(unsigned parts, std::function<void(unsigned)> fn) {
        {
            std::lock_guard<std::mutex> lock(m_);
            fn_ = std::move(fn);
            parts_ = parts, next_ = 0, done_ = 0, ++job_;
        }
        work_.notify_all();
    }
    void finish() {
        std::unique_lock<std::mutex> lock(m_);
        run_parts(lock, job_);
        done_cv_.wait(lock, [&] { return done_ == parts_; });
    }

  private:
    void run_parts(std::unique_lock<std::mutex>& lock, uint64_t job) {
        while (job_ == job && next_ < parts_) {
            const unsigned part = next_++;
            std::function<void(unsigned)>& fn = fn_;
            lock.unlock();
            fn(part);
            lock.lock();
            if (++done_ == parts_)
                done_cv_.notify_all();
        }
    }
    void loop() {
        std::unique_lock<std::mutex> lock(m_);
        uint64_t seen = 0;
        for (;;) {
            work_.wait(lock, [&] { return stop_ || (job_ != seen && next_ < parts_); });
            if (stop_)
                return;
            seen = job_;
            run_parts(lock, seen);
        }
    }

    std::vector<std::thread> threads_;
    std::mutex m_;
    std::condition_variable work_, done_cv_;
    std::function<void(unsigned)> fn_;
    unsigned parts_ = 0, next_ = 0, done_ = 0;
    uint64_t job_ = 0;
    bool stop_ = false;
};

} // namespace

struct SyntheticFiller::Impl {
    uint64_t seed, band;
    Pool pool;
    std::vector<uint8_t> buffers[2];

    Impl(uint64_t s, unsigned n_threads, uint64_t band_bytes)
        : seed(s), band(std::max<uint64_t>(8, (band_bytes + 7) / 8 * 8)), pool(std::max(1u, n_threads) - 1) {}

    void produce_direct(const PlannedObject& o, TensorFormat f, const std::vector<Piece>& pieces,
                        const ObjectSink& sink);
    void produce_float(const PlannedObject& o, TensorFormat f, const ObjectSink& sink);
};

// Bands of every piece in offset order; band k+1 is generated on the pool while band k goes to
// the sink from the other buffer.
void SyntheticFiller::Impl::produce_direct(const PlannedObject& o, TensorFormat f,
                                           const std::vector<Piece>& pieces, const ObjectSink& sink) {
    struct Band {
        const Piece* piece;
        uint64_t at, bytes;
    };
    std::vector<Band> bands;
    for (const Piece& p : pieces)
        for (uint64_t at = 0; at < p.bytes; at += band)
            bands.push_back({&p, at, std::min(band, p.bytes - at)});
    const uint64_t h = hash_text(o.id);
    for (std::vector<uint8_t>& b : buffers)
        if (b.size() < std::min(band, o.shape[0] * o.shape[1] * 2 + 8))
            b.resize(band);
    auto start = [&](size_t k) {
        const Band b = bands[k];
        uint8_t* out = buffers[k & 1].data();
        const uint64_t words = (b.bytes + 7) / 8;
        const unsigned parts = unsigned(std::clamp<uint64_t>(b.bytes / kMinPartBytes, 1, 4 * pool.threads()));
        pool.start(parts, [this, b, out, h, words, parts](unsigned i) {
            const uint64_t w0 = words * i / parts, w1 = words * (i + 1) / parts;
            const uint64_t begin = w0 * 8, end = std::min(b.bytes, w1 * 8);
            if (end > begin)
                fill_piece(*b.piece, seed, h, b.at + begin, end - begin, out + begin);
        });
    };
    if (!bands.empty())
        start(0), pool.finish();
    for (size_t k = 0; k < bands.size(); ++k) {
        if (k + 1 < bands.size())
            start(k + 1);
        sink(bands[k].piece->offset + bands[k].at, std::span<const uint8_t>(buffers[k & 1]).first(bands[k].bytes));
        if (k + 1 < bands.size())
            pool.finish();
    }
    write_plane_padding(f, o.shape[0], o.shape[1], sink);
}

// Init-distribution values encoded canonically, a band of rows at a time. Every value is one
// draw, so a band starts its stream at draw r0*cols.
void SyntheticFiller::Impl::produce_float(const PlannedObject& o, TensorFormat f, const ObjectSink& sink) {
    const Rng rng0 = stream(seed, hash_text(o.id), 0xffff, 0);
    const uint64_t rows = o.rows(), cols = o.cols();
    auto draw_values = [&](uint64_t r0, uint64_t n) {
        Rng rng = rng0.skip(r0 * cols);
        std::vector<float> values(n * cols);
        for (float& v : values)
            v = draw(o.init, rng);
        return values;
    };
    // nvfp4's divisor depends on the whole tensor; it only takes this path for small objects.
    if (f == TensorFormat::Nvfp4) {
        sink(0, encode(f, o.shape, draw_values(0, rows)));
        return;
    }
    const uint64_t band_rows = std::max<uint64_t>(1, band / (4 * cols));
    for (uint64_t r0 = 0; r0 < rows; r0 += band_rows) {
        const uint64_t n = std::min(band_rows, rows - r0);
        write_row_chunk(f, rows, cols, r0, n, draw_values(r0, n), 0.0f, sink);
    }
    write_plane_padding(f, rows, cols, sink);
}

SyntheticFiller::SyntheticFiller(uint64_t seed, unsigned n_threads, uint64_t band_bytes)
    : impl_(std::make_unique<Impl>(seed, n_threads, band_bytes)) {}

SyntheticFiller::~SyntheticFiller() = default;

void SyntheticFiller::produce(const PlannedObject& o, TensorFormat f, const ObjectSink& sink) {
    if (o.init == SyntheticInit::Matrix && o.shape.size() == 2) {
        std::array<uint8_t, 4> divisor{};
        const std::vector<Piece> pieces = direct_pieces(o, f, divisor);
        if (!pieces.empty()) {
            impl_->produce_direct(o, f, pieces, sink);
            if (f == TensorFormat::Nvfp4)
                sink(nvfp4_geometry(o.shape[0], o.shape[1]).div_off, divisor);
            return;
        }
    }
    impl_->produce_float(o, f, sink);
}

} // namespace ninfer::core
