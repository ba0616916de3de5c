// ninfer - host emulation of the q4 GEMV's fp32 group sums (kernels/PERF_NOTES.md "q4 offset
// dequantisation"): the exact path (q * x products, q in -8..7) against the offset path ((136 + q) * x,
// each group's sum started at the producers' offset float(-136 * X_g), X_g summed in f64), both in 4 mma steps of 16 exact products per 64-code
// group, then scaled by the group multiplier (fma), against an fp64 reference; |error| / sum|w x|
// (the GEMV test's tolerance is 2e-5 of it). Tensor-core accumulation models: 0 = exact sum rounded
// once per mma; 1 = addends aligned to the largest exponent and truncated to 24 bits, sum truncated
// (round toward zero); 2 = as 1 in 4 chunks of 4 products; 3 = as 1 with 23 bits (pessimistic).
// Build and run: g++ -O2 -o /tmp/q4emu scripts/q4_offset_emu.cpp && /tmp/q4emu K ROWS DIST LO
//   DIST 0: x uniform(-2, 2); 1: N(0.3, 1) with 1% of the channels x30; 2: |uniform(-2, 2)| (all x > 0).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
static float bf16r(float v) { uint32_t u; std::memcpy(&u, &v, 4); u += 0x7fff + ((u >> 16) & 1); u &= 0xffff0000u; float r; std::memcpy(&r, &u, 4); return r; }
// model: 0 = exact sum of C + 16 products, round to nearest f32 once per mma
//        1 = align to max exponent keeping 24 bits (truncate), sum, truncate to f32 (RZ)
//        2 = like 1 but in 4 chunks of 4 products (4 truncating accumulations per mma)
//        3 = like 1 with 23 bits kept (one bit less than f32: pessimistic)
static double trunc_to(double v, int e, int bits) { // chop v below 2^(e - bits + 1)
    const double q = std::ldexp(1.0, e - bits + 1);
    return std::trunc(v / q) * q;
}
static float rz_f32(double v) { float f = float(v); if (std::fabs(double(f)) > std::fabs(v)) f = std::nextafter(f, 0.f); return f; }
static float mma_acc(float c, const double* p, int n, int model) {
    if (model == 0) { double s = c; for (int i = 0; i < n; ++i) s += p[i]; return float(s); }
    const int bits = model == 3 ? 23 : 24;
    const int chunk = model == 2 ? 4 : n;
    float acc = c;
    for (int b = 0; b < n; b += chunk) {
        int e = -1000;
        auto ex = [](double v) { int x; std::frexp(v, &x); return x - 1; };
        if (acc != 0) e = std::max(e, ex(acc));
        for (int i = b; i < b + chunk; ++i) if (p[i] != 0) e = std::max(e, ex(p[i]));
        if (e == -1000) continue;
        double s = trunc_to(acc, e, bits);
        for (int i = b; i < b + chunk; ++i) s += trunc_to(p[i], e, bits);
        acc = rz_f32(s);
    }
    return acc;
}
int main(int argc, char** argv) {
    const int k = argc > 1 ? atoi(argv[1]) : 5120;
    const int rows = argc > 2 ? atoi(argv[2]) : 2000;
    const int dist = argc > 3 ? atoi(argv[3]) : 0; // 0 uniform(-2,2); 1 N(0.3,1) + 1% outliers x30; 2 positive uniform(0,2)
    const int lo = argc > 4 ? atoi(argv[4]) : 0;
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<float> U(-2.f, 2.f), U01(0.f, 1.f);
    std::normal_distribution<float> N(0.3f, 1.f);
    std::vector<float> x32(k), xh(k), xl(k);
    for (int i = 0; i < k; ++i) {
        float v = dist == 0 ? U(rng) : dist == 1 ? N(rng) * (U01(rng) < 0.01f ? 30.f : 1.f) : std::fabs(U(rng));
        x32[i] = v; xh[i] = bf16r(v); xl[i] = lo ? bf16r(v - xh[i]) : 0.f;
    }
    const int G = k / 64;
    std::vector<float> Xh(G), Xl(G);
    for (int g = 0; g < G; ++g) { double a = 0, b = 0; for (int i = 0; i < 64; ++i) { a += xh[64*g+i]; b += xl[64*g+i]; } Xh[g] = float(-136.0 * a); Xl[g] = float(-136.0 * b); } // the producers' offsets
    for (int model = 0; model < 4; ++model) {
        double worst_exact = 0, worst_off = 0, sum_exact = 0, sum_off = 0;
        for (int r = 0; r < rows; ++r) {
            std::vector<int> q(k); std::vector<float> s(G);
            for (int i = 0; i < k; ++i) q[i] = int(rng() % 16) - 8;
            for (int g = 0; g < G; ++g) s[g] = float(std::ldexp(1.0 + U01(rng), -int(6 + rng() % 7)));
            double ref = 0, mag = 0;
            for (int i = 0; i < k; ++i) { const double w = double(s[i/64]) * q[i]; ref += w * (double(xh[i]) + xl[i]); mag += std::fabs(w * (double(xh[i]) + xl[i])); }
            float got[2] = {0, 0};
            for (int path = 0; path < 2; ++path) {
                float acc_h = 0, acc_l = 0;
                for (int g = 0; g < G; ++g) {
                    for (int half = 0; half < (lo ? 2 : 1); ++half) {
                        const float* x = half ? xl.data() : xh.data();
                        const float X = half ? Xl[g] : Xh[g];
                        float part = path ? X : 0.f; // the offset seeds the accumulator
                        for (int m = 0; m < 4; ++m) {
                            double p[16];
                            for (int j = 0; j < 16; ++j) { const int i = 64*g + 16*m + j; p[j] = double(path ? 136 + q[i] : q[i]) * x[i]; }
                            part = mma_acc(part, p, 16, model);
                        }
                        float& acc = half ? acc_l : acc_h;
                        acc = std::fma(part, s[g], acc);
                    }
                }
                got[path] = acc_h + acc_l;
            }
            const double e0 = std::fabs(got[0] - ref) / mag, e1 = std::fabs(got[1] - ref) / mag;
            worst_exact = std::max(worst_exact, e0); worst_off = std::max(worst_off, e1); sum_exact += e0; sum_off += e1;
        }
        printf("k=%d dist=%d lo=%d model=%d  |err|/sum|wx|: exact mean %.2e max %.2e   offset mean %.2e max %.2e  (tol 2e-5: offset max = %.1f%% of it)\n",
               k, dist, lo, model, sum_exact / rows, worst_exact, sum_off / rows, worst_off, 100 * worst_off / 2e-5);
    }
}
