// ninfer::kernels - repacks a weight from its artifact layout into the tiled GEMV layout (gemv.h).
#include "gemv_tiled.cuh"
#include "ninfer/kernels/gemv.h"

namespace ninfer::kernels {

namespace {

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

struct PackGeometry {
    int64_t n, k, tiles, units, row_bytes, src_scale_off, dst_scale_off, groups;
    int64_t src_high_off, high_row; // q5/q6: the artifact's high-bit plane and its bytes per row
    int bits;                        // q4/q5/q6: 4, 5, 6; else 0
    bool q8;                         // q8: 32-code groups, two per unit
};

PackGeometry geometry(WeightFormat f, int64_t n, int64_t k) {
    PackGeometry g{};
    g.n = n;
    g.k = k;
    g.tiles = (n + 15) / 16;
    switch (f) {
    case WeightFormat::Bf16: g.row_bytes = 2 * k; break;
    case WeightFormat::Fp8E4m3RowBf16: g.row_bytes = k; g.src_scale_off = align_up(n * k, 256); break;
    case WeightFormat::Q4G64Fp16:
    case WeightFormat::Q5G64Fp16:
    case WeightFormat::Q6G64Fp16: // row_split_k128_v1: base | high (q5/q6) | scales, 256-byte aligned planes
        g.bits = detail::tiled_bits(f);
        g.groups = align_up(k, 128) / 64;
        g.row_bytes = g.groups * 32;
        g.high_row = g.groups * 8 * (g.bits - 4);
        g.src_high_off = align_up(n * g.row_bytes, 256);
        g.src_scale_off = g.src_high_off + align_up(n * g.high_row, 256);
        break;
    case WeightFormat::Q8G32Fp16: // base | scales
        g.q8 = true;
        g.groups = align_up(k, 128) / 32;
        g.row_bytes = g.groups * 32;
        g.src_scale_off = align_up(n * g.row_bytes, 256);
        break;
    default: return g; // nvfp4: no tiled layout (units 0)
    }
    const int64_t unit_bytes = g.bits ? 32 : 64;
    g.units = align_up((g.row_bytes + unit_bytes - 1) / unit_bytes, detail::kTiledUnitPad);
    g.dst_scale_off = align_up(g.tiles * g.units * detail::tiled_block_bytes(f), 256);
    return g;
}

// One thread per 16-byte vector of the tiled code plane (q4/q5/q6: per lane of a block, its base
// vector and, q5/q6, its high words).
__global__ void pack_codes_kernel(const uint8_t* src, uint8_t* dst, PackGeometry g, bool q4) {
    const int64_t vecs = g.tiles * g.units * (q4 ? 32 : 64);
    const int64_t block_bytes = q4 ? 512 + 128 * (g.bits - 4) : 1024;
    for (int64_t v = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vecs; v += int64_t(gridDim.x) * blockDim.x) {
        uint8_t out[16];
        if (q4) { // 512 bytes of nibbles: lane l = 4*row + c holds row's bytes c*8.. and row+8's
            const int64_t block = v / 32, tile = block / g.units, unit = block % g.units;
            const int lane = int(v % 32), r = lane / 4, c = lane % 4;
            uint8_t* out_block = dst + block * block_bytes;
            if (g.bits > 4) { // q5/q6: the lane's words (gemv_tiled_q56.h)
                uint8_t vals[32];
                for (int h = 0; h < 2; ++h) {
                    const int64_t row = tile * 16 + r + 8 * h;
                    const bool real = row < g.n && unit < g.groups;
                    const uint8_t* base = real ? src + row * g.row_bytes + unit * 32 : nullptr;
                    const uint8_t* high = real ? src + g.src_high_off + row * g.high_row + unit * 8 * (g.bits - 4) : nullptr;
                    for (int i = 0; i < 16; ++i)
                        vals[16 * h + i] = uint8_t(detail::q56_artifact_value(g.bits, base, high, 16 * c + i));
                }
                uint32_t words[6];
                detail::q56_pack_lane(g.bits, vals, words);
                for (int i = 0; i < 4; ++i) reinterpret_cast<uint32_t*>(out_block + lane * 16)[i] = words[i];
                for (int i = 0; i < g.bits - 4; ++i)
                    reinterpret_cast<uint32_t*>(out_block + 512)[lane * (g.bits - 4) + i] = words[4 + i];
                continue;
            }
            for (int j = 0; j < 16; ++j) { // gemv_tiled_q4.h
                const int64_t row = tile * 16 + detail::q4_lane_row(lane, j);
                const int64_t col = unit * 32 + detail::q4_lane_group_byte(lane, j);
                out[j] = row < g.n && col < g.row_bytes ? src[row * g.row_bytes + col] : 0;
            }
            *reinterpret_cast<uint4*>(out_block + lane * 16) = *reinterpret_cast<const uint4*>(out);
            continue;
        }
        if (g.q8) { // 1024 bytes: vector h * 32 + lane holds row r + 8h's words at k = 16m + 4c, m = 0..3
            // (bytes in the order k, k + 2, k + 1, k + 3: gemv_tiled.cuh)
            const int64_t block = v / 64, tile = block / g.units, unit = block % g.units;
            const int lane = int(v % 32), h = int(v % 64) / 32, r = lane / 4, c = lane % 4;
            const int64_t row = tile * 16 + r + 8 * h;
            for (int m = 0; m < 4; ++m)
                for (int b = 0; b < 4; ++b) {
                    const int64_t col = unit * 64 + 16 * m + 4 * c + b;
                    out[4 * m + detail::q8_byte_slot(b)] = row < g.n && col < g.row_bytes ? src[row * g.row_bytes + col] : 0;
                }
            *reinterpret_cast<uint4*>(dst + v * 16) = *reinterpret_cast<const uint4*>(out);
            continue;
        }
        // bf16/fp8 block of 1024 bytes: 16 rows x 64 bytes, row-major
        const int64_t block = v / 64, tile = block / g.units, unit = block % g.units;
        const int r = int(v % 64) / 4, c = int(v % 4);
        const int64_t row = tile * 16 + r, col = unit * 64 + c * 16;
        for (int b = 0; b < 16; ++b)
            out[b] = row < g.n && col + b < g.row_bytes ? src[row * g.row_bytes + col + b] : 0;
        *reinterpret_cast<uint4*>(dst + v * 16) = *reinterpret_cast<const uint4*>(out);
    }
}

// q4/q5/q6: one thread per (tile, unit quad, row g): half2 {scale(row g), scale(row g + 8)} for 4 units.
// q8: one thread per (tile, unit pair, row g): those half2 for the pair's 4 groups in k order.
// fp8: one thread per padded row.
__global__ void pack_scales_kernel(const uint8_t* src, uint8_t* dst, PackGeometry g, bool q4) {
    const int64_t items = q4 ? g.tiles * (g.units / 4) * 8 : g.q8 ? g.tiles * (g.units / 2) * 8 : g.tiles * 16;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += int64_t(gridDim.x) * blockDim.x) {
        if (g.q8) {
            const __half* s = reinterpret_cast<const __half*>(src);
            const int64_t tile = i / ((g.units / 2) * 8), pair = i % ((g.units / 2) * 8) / 8;
            const int r = int(i % 8);
            __half out[8];
            for (int j = 0; j < 4; ++j) // group 2 * pair * 2 + j of the row
                for (int h = 0; h < 2; ++h) {
                    const int64_t row = tile * 16 + r + 8 * h, grp = pair * 4 + j;
                    out[2 * j + h] = row < g.n && grp < g.groups ? s[row * g.groups + grp] : __float2half(0.f);
                }
            reinterpret_cast<uint4*>(dst)[i] = *reinterpret_cast<const uint4*>(out);
            continue;
        }
        if (!q4) {
            const __nv_bfloat16* s = reinterpret_cast<const __nv_bfloat16*>(src);
            reinterpret_cast<__nv_bfloat16*>(dst)[i] = i < g.n ? s[i] : __float2bfloat16(0.f);
            continue;
        }
        const __half* s = reinterpret_cast<const __half*>(src);
        const int64_t tile = i / ((g.units / 4) * 8), rem = i % ((g.units / 4) * 8), quad = rem / 8;
        const int r = int(rem % 8);
        __half out[8];
        for (int j = 0; j < 4; ++j)
            for (int h = 0; h < 2; ++h) {
                const int64_t row = tile * 16 + r + 8 * h, unit = quad * 4 + j;
                out[2 * j + h] = row < g.n && unit < g.groups ? s[row * g.groups + unit] : __float2half(0.f);
            }
        reinterpret_cast<uint4*>(dst)[i] = *reinterpret_cast<const uint4*>(out);
    }
}

} // namespace

int64_t tiled_units(WeightFormat format, int64_t n, int64_t k) { return geometry(format, n, k).units; }

size_t tiled_weight_bytes(WeightFormat format, int64_t n, int64_t k) {
    if (!gemv_has_tiled_layout(format)) return 0;
    const PackGeometry g = geometry(format, n, k);
    const int64_t scales = format == WeightFormat::Bf16             ? 0
                           : format == WeightFormat::Fp8E4m3RowBf16 ? g.tiles * 32
                                                                    : g.tiles * g.units * detail::tiled_scale_unit_bytes(format);
    return size_t(g.dst_scale_off + scales);
}

cudaError_t gemv_pack_tiled(const WeightView& src, void* dst, cudaStream_t stream) {
    if (src.layout != WeightLayout::Artifact || !gemv_has_tiled_layout(src.format) || !src.data || !dst || src.n < 1 || src.k < 16 || src.k % 16 != 0 ||
        (reinterpret_cast<uintptr_t>(dst) & 15u) != 0)
        return cudaErrorInvalidValue;
    const PackGeometry g = geometry(src.format, src.n, src.k);
    const bool q4 = g.bits > 0; // q4/q5/q6: grouped blocks and multipliers
    const uint8_t* s = static_cast<const uint8_t*>(src.data);
    uint8_t* d = static_cast<uint8_t*>(dst);
    const int64_t vecs = g.tiles * g.units * (q4 ? 32 : 64);
    pack_codes_kernel<<<unsigned(std::min<int64_t>(65535, (vecs + 255) / 256)), 256, 0, stream>>>(s, d, g, q4);
    if (src.format != WeightFormat::Bf16)
        pack_scales_kernel<<<unsigned(std::min<int64_t>(65535, (g.tiles * g.units + 255) / 256 + 1)), 256, 0, stream>>>(
            s + g.src_scale_off, d + g.dst_scale_off, g, q4);
    return cudaGetLastError();
}

} // namespace ninfer::kernels
