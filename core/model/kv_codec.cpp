// ninfer::core - encode and decode KV cache rows (bf16, fp8 e4m3 row-scaled, int8 group 64).
#include "core/model/kv_codec.h"

#include "core/formats/codec.h"
#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ninfer::core {

uint64_t kv_row_bytes(KvDtype dtype, uint32_t head_dim) {
    switch (dtype) {
    case KvDtype::Bf16: return 2ull * head_dim;
    case KvDtype::F32: return 4ull * head_dim;
    case KvDtype::Fp8: return head_dim + 2ull;
    case KvDtype::Int8: return head_dim + 2ull * ((head_dim + kKvInt8Group - 1) / kKvInt8Group);
    }
    return 0;
}

static void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
static uint16_t get_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

static float max_abs(const float* x, uint32_t n) {
    float m = 0;
    for (uint32_t i = 0; i < n; ++i)
        m = std::max(m, std::fabs(x[i]));
    return m;
}

void kv_encode_row(KvDtype dtype, const float* x, uint32_t d, uint8_t* out) {
    switch (dtype) {
    case KvDtype::Bf16:
        for (uint32_t i = 0; i < d; ++i)
            put_u16(out + 2 * i, f32_to_bf16(x[i]));
        return;
    case KvDtype::F32:
        std::memcpy(out, x, 4ull * d);
        return;
    case KvDtype::Fp8: {
        const float amax = max_abs(x, d);
        uint16_t s = amax > 0 ? f32_to_bf16(amax / 448.0f) : 0;
        if (s == 0 && amax > 0)
            s = 1;
        const float inv = s ? 1.0f / bf16_to_f32(s) : 0.0f;
        for (uint32_t i = 0; i < d; ++i)
            out[i] = f32_to_e4m3(std::clamp(x[i] * inv, -448.0f, 448.0f));
        put_u16(out + d, s);
        return;
    }
    case KvDtype::Int8:
        for (uint32_t g = 0; g * kKvInt8Group < d; ++g) {
            const uint32_t lo = g * kKvInt8Group, n = std::min(kKvInt8Group, d - lo);
            const float amax = max_abs(x + lo, n);
            uint16_t s = amax > 0 ? f32_to_f16(amax / 127.0f) : 0;
            if (s == 0 && amax > 0)
                s = 1;
            const float inv = s ? 1.0f / f16_to_f32(s) : 0.0f;
            for (uint32_t i = lo; i < lo + n; ++i)
                out[i] = uint8_t(int8_t(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f)));
            put_u16(out + d + 2 * g, s);
        }
        return;
    }
}

void kv_decode_row(KvDtype dtype, const uint8_t* row, uint32_t d, float* out) {
    switch (dtype) {
    case KvDtype::Bf16:
        for (uint32_t i = 0; i < d; ++i)
            out[i] = bf16_to_f32(get_u16(row + 2 * i));
        return;
    case KvDtype::F32:
        std::memcpy(out, row, 4ull * d);
        return;
    case KvDtype::Fp8: {
        const float s = bf16_to_f32(get_u16(row + d));
        for (uint32_t i = 0; i < d; ++i)
            out[i] = e4m3_to_f32(row[i]) * s;
        return;
    }
    case KvDtype::Int8:
        for (uint32_t g = 0; g * kKvInt8Group < d; ++g) {
            const uint32_t lo = g * kKvInt8Group, n = std::min(kKvInt8Group, d - lo);
            const float s = f16_to_f32(get_u16(row + d + 2 * g));
            for (uint32_t i = lo; i < lo + n; ++i)
                out[i] = float(int8_t(row[i])) * s;
        }
        return;
    }
}

std::string_view kv_dtype_name(KvDtype dtype) {
    switch (dtype) {
    case KvDtype::Bf16: return "bf16";
    case KvDtype::Fp8: return "fp8";
    case KvDtype::Int8: return "int8";
    case KvDtype::F32: return "f32";
    }
    return "?";
}

KvDtype kv_dtype_from_name(std::string_view name) {
    if (name == "bf16") return KvDtype::Bf16;
    if (name == "fp8") return KvDtype::Fp8;
    if (name == "int8") return KvDtype::Int8;
    if (name == "f32") return KvDtype::F32;
    throw Error("kv: unknown KV dtype '" + std::string(name) + "' (bf16, fp8, int8 or f32)");
}

} // namespace ninfer::core
