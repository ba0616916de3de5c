// ninfer::core - synthetic artifacts: named shapes and seeded random weights drawn like an init.
#include "core/convert/synthetic.h"

#include "core/artifact/artifact.h"
#include "core/convert/hf_source.h"
#include "core/convert/plan.h"
#include "core/formats/codec.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

namespace ninfer::core {
namespace {

constexpr double kInitStd = 0.02;
constexpr uint64_t kSyntheticVocab = 151936; // rows of the Qwen3 tokenizer's embedding
constexpr uint64_t kChunkBytes = 4ull << 20; // unit of parallel, seed-stable generation

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

// wyrand: one multiply per 64 random bits, so generation keeps up with the disk.
struct Rng {
    uint64_t s;
    uint64_t next() {
        s += 0xa0761d6478bd642full;
        __uint128_t t = __uint128_t(s) * (s ^ 0xe7037ed1a0b428dbull);
        return uint64_t(t >> 64) ^ uint64_t(t);
    }
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

struct Region {
    uint64_t offset, bytes;
    enum Kind { TableBytes, RandomBytes, Bf16Words } kind;
    const uint8_t* table; // for TableBytes
};

void fill_chunk(const Region& r, Rng rng, uint8_t* p, uint64_t n) {
    const Tables& t = tables();
    uint64_t i = 0;
    if (r.kind == Region::Bf16Words) {
        for (; i + 8 <= n; i += 8) {
            uint64_t x = rng.next();
            for (int j = 0; j < 4; ++j) {
                uint16_t w = t.bf16[(x >> (16 * j)) & 0xffff];
                std::memcpy(p + i + 2 * j, &w, 2);
            }
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            uint64_t x = rng.next();
            if (r.kind == Region::RandomBytes) {
                std::memcpy(p + i, &x, 8);
            } else {
                for (int j = 0; j < 8; ++j)
                    p[i + j] = r.table[(x >> (8 * j)) & 0xff];
            }
        }
    }
    // Region sizes are multiples of 8 in every layout we fill; keep the tail defined anyway.
    for (; i < n; ++i)
        p[i] = 0;
}

// Fills the regions of one object, chunk by chunk, on up to n_threads threads. Each chunk has its
// own seeded stream, so the bytes do not depend on the thread count.
void fill_regions(const std::vector<Region>& regions, uint64_t seed, uint64_t object_hash,
                  unsigned n_threads, uint8_t* out) {
    struct Task {
        size_t region;
        uint64_t chunk;
    };
    std::vector<Task> tasks;
    uint64_t total = 0;
    for (size_t r = 0; r < regions.size(); ++r) {
        total += regions[r].bytes;
        for (uint64_t c = 0; c * kChunkBytes < regions[r].bytes; ++c)
            tasks.push_back({r, c});
    }
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t k; (k = next.fetch_add(1)) < tasks.size();) {
            const Region& r = regions[tasks[k].region];
            uint64_t begin = tasks[k].chunk * kChunkBytes;
            uint64_t n = std::min(kChunkBytes, r.bytes - begin);
            fill_chunk(r, stream(seed, object_hash, tasks[k].region, tasks[k].chunk), out + r.offset + begin, n);
        }
    };
    unsigned threads = total < 2 * kChunkBytes ? 1 : std::min<unsigned>(n_threads, unsigned(tasks.size()));
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < threads; ++i)
        pool.emplace_back(work);
    work();
    for (std::thread& th : pool)
        th.join();
}

void fill_constant_u16(uint8_t* p, uint64_t count, uint16_t word) {
    for (uint64_t i = 0; i < count; ++i)
        std::memcpy(p + 2 * i, &word, 2);
}

// Draws codes and scales straight into the layout. Returns false when the shape needs K padding
// (row_split with K % 128 != 0), which the float path handles canonically.
bool fill_matrix_direct(const PlannedObject& o, TensorFormat f, uint64_t seed, unsigned n_threads,
                        std::vector<uint8_t>& out) {
    const Tables& t = tables();
    const uint64_t n = o.shape[0], k = o.shape[1], h = hash_text(o.id);
    switch (f) {
    case TensorFormat::Bf16:
        fill_regions({{0, n * k * 2, Region::Bf16Words, nullptr}}, seed, h, n_threads, out.data());
        return true;
    case TensorFormat::Fp8E4m3fnRowBf16: {
        RowScaleGeometry g = row_scale_geometry(n, k);
        fill_regions({{0, n * k, Region::TableBytes, t.fp8}}, seed, h, n_threads, out.data());
        fill_constant_u16(out.data() + g.scale_off, n, f32_to_bf16(float(kInitStd / t.std_fp8)));
        return true;
    }
    case TensorFormat::Nvfp4: {
        // E2M1 magnitudes {0,.5,1,1.5,2,3,4,6} have RMS sqrt(68.5/8); the divisor sets the std.
        Nvfp4Geometry g = nvfp4_geometry(n, k);
        const uint8_t scale = f32_to_e4m3(0.4375f);
        fill_regions({{0, g.code_bytes, Region::RandomBytes, nullptr}}, seed, h, n_threads, out.data());
        std::memset(out.data() + g.scale_off, scale, g.scale_bytes);
        float divisor = float(std::sqrt(68.5 / 8) * e4m3_to_f32(scale) / kInitStd);
        std::memcpy(out.data() + g.div_off, &divisor, 4);
        return true;
    }
    default: break;
    }
    if (k % 128 != 0)
        return false;
    RowSplitGeometry g = row_split_geometry(f, n, k);
    const uint8_t* table = f == TensorFormat::Q4G64Fp16 ? t.q4 : f == TensorFormat::Q8G32Fp16 ? t.q8 : t.q56;
    double code_std = f == TensorFormat::Q4G64Fp16   ? t.std_q4
                      : f == TensorFormat::Q5G64Fp16 ? t.std_q5
                      : f == TensorFormat::Q6G64Fp16 ? t.std_q6
                                                     : t.std_q8;
    std::vector<Region> regions = {{0, n * g.base_row, Region::TableBytes, table}};
    if (g.high_row)
        regions.push_back({g.high_off, n * g.high_row, Region::RandomBytes, nullptr});
    fill_regions(regions, seed, h, n_threads, out.data());
    fill_constant_u16(out.data() + g.scale_off, n * g.groups_per_row, f32_to_f16(float(kInitStd / code_std)));
    return true;
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

void produce_synthetic(const PlannedObject& o, TensorFormat f, uint64_t seed, unsigned n_threads,
                       std::vector<uint8_t>& out) {
    if (o.init == SyntheticInit::Matrix && o.shape.size() == 2 &&
        fill_matrix_direct(o, f, seed, n_threads, out))
        return;
    Rng rng = stream(seed, hash_text(o.id), 0xffff, 0);
    std::vector<float> values(o.rows() * o.cols());
    for (float& v : values)
        v = draw(o.init, rng);
    std::vector<uint8_t> encoded = encode(f, o.shape, values);
    std::memcpy(out.data(), encoded.data(), out.size());
}

ModelConfig base_config(ModelArch arch) {
    ModelConfig c;
    c.arch = arch;
    c.model_type = arch == ModelArch::Dense ? "qwen3_5_text" : "qwen3_5_moe_text";
    c.vocab_size = kSyntheticVocab;
    c.rms_norm_eps = 1e-6f;
    c.max_position_embeddings = 262144;
    c.rope_theta = 1e7;
    c.partial_rotary_factor = 0.25;
    c.mrope_interleaved = true;
    c.linear_conv_kernel_dim = 4;
    return c;
}

void set_layers(ModelConfig& c, uint32_t n) {
    c.num_hidden_layers = n;
    c.layer_types.clear();
    for (uint32_t i = 0; i < n; ++i)
        c.layer_types.push_back((i + 1) % 4 == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention);
}

} // namespace

std::vector<std::string_view> synthetic_shape_names() {
    return {"tiny", "tiny-moe", "qwen3.6-27b", "qwen3.6-35b-a3b"};
}

ModelConfig synthetic_shape_config(std::string_view shape) {
    if (shape == "tiny" || shape == "tiny-moe") {
        ModelConfig c = base_config(shape == "tiny" ? ModelArch::Dense : ModelArch::Moe);
        c.hidden_size = 64;
        set_layers(c, 4);
        c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 64;
        c.mrope_section = {3, 3, 2};
        c.linear_num_key_heads = 2, c.linear_key_head_dim = 32;
        c.linear_num_value_heads = 4, c.linear_value_head_dim = 48;
        if (c.is_moe())
            c.num_experts = 8, c.num_experts_per_tok = 2, c.moe_intermediate_size = 32,
            c.shared_expert_intermediate_size = 64;
        else
            c.intermediate_size = 128;
        c.validate();
        return c;
    }
    if (shape == "qwen3.6-27b" || shape == "qwen3.6-35b-a3b") {
        bool dense = shape == "qwen3.6-27b";
        ModelConfig c = base_config(dense ? ModelArch::Dense : ModelArch::Moe);
        c.hidden_size = dense ? 5120 : 2048;
        set_layers(c, dense ? 64 : 40);
        c.num_attention_heads = dense ? 24 : 16, c.num_key_value_heads = dense ? 4 : 2, c.head_dim = 256;
        c.mrope_section = {11, 11, 10};
        c.linear_num_key_heads = 16, c.linear_key_head_dim = 128;
        c.linear_num_value_heads = dense ? 48 : 32, c.linear_value_head_dim = 128;
        if (dense)
            c.intermediate_size = 17408;
        else
            c.num_experts = 256, c.num_experts_per_tok = 8, c.moe_intermediate_size = 512,
            c.shared_expert_intermediate_size = 512;
        c.validate();
        return c;
    }
    std::string names;
    for (std::string_view n : synthetic_shape_names())
        names += (names.empty() ? "" : ", ") + std::string(n);
    throw Error("convert: unknown synthetic shape \"" + std::string(shape) + "\" (shapes: " + names + ")");
}

uint64_t write_synthetic(const SyntheticRequest& req) {
    const ModelConfig config = synthetic_shape_config(req.shape);
    PlanOptions options;
    options.with_mtp = req.with_mtp;
    const std::vector<PlannedObject> plan = plan_objects(config, options);

    EmitRequest e;
    e.out_path = req.out_path;
    e.force = req.force;
    e.config = &config;
    e.plan = &plan;
    e.recipe = &req.recipe;
    const std::string dir = req.tokenizer_dir;
    e.text_resources.tokenizer_json = read_file_text(dir + "/tokenizer.json");
    e.text_resources.tokenizer_config_json = read_file_text(dir + "/tokenizer_config.json");
    e.text_resources.chat_template = chat_template_of(e.text_resources.tokenizer_config_json);
    if (e.text_resources.chat_template.empty())
        throw Error("convert: " + dir + "/tokenizer_config.json has no chat_template");
    std::vector<TokenText> specials =
        special_tokens(e.text_resources.tokenizer_json, e.text_resources.tokenizer_config_json);
    std::optional<uint64_t> im_end = find_token_id(specials, "<|im_end|>");
    std::optional<uint64_t> eot = find_token_id(specials, "<|endoftext|>");
    if (!im_end || !eot)
        throw Error("convert: " + dir + "/tokenizer.json lacks <|im_end|> or <|endoftext|>");
    e.text_resources.generation_config_json = generation_config_for({*im_end, *eot}, eot);
    check_token_ids(config.vocab_size, e.text_resources);
    e.with_mtp = req.with_mtp;
    e.name = req.name.empty() ? std::filesystem::path(req.out_path).stem().string() : req.name;
    e.synthetic = true;
    e.provenance_json = "{\"source\":\"synthetic\",\"shape\":" + json_quote(req.shape) +
                        ",\"recipe\":" + json_quote(req.recipe.name) +
                        ",\"formats\":" + req.recipe.overrides_json() +
                        ",\"seed\":" + std::to_string(req.seed) + "}";
    unsigned threads = req.n_threads ? req.n_threads : std::max(1u, std::thread::hardware_concurrency());
    e.produce = [&](const PlannedObject& o, TensorFormat f, std::vector<uint8_t>& out) {
        produce_synthetic(o, f, req.seed, threads, out);
    };
    e.progress = req.progress;
    return emit_artifact(e);
}

std::string warn_if_synthetic(const Artifact& artifact) {
    if (!artifact.is_synthetic())
        return {};
    std::string line = "warning: " + artifact.path() + " (" + artifact.metadata_name() +
                       ") holds synthetic random weights; its output is meaningless";
    std::fprintf(stderr, "%s\n", line.c_str());
    return line;
}

} // namespace ninfer::core
