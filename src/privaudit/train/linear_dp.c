/* privaudit — the DP-SGD clipped sum of M linear softmax heads, fused with the row gather.
 *
 * Built and loaded by privaudit/train/native.py (ctypes; see its docstring for why and how).
 *
 * For each model m in [m0, m1) and each row v of its Poisson batch (idx[m, :counts[m]]; base rows
 * v < n, the model's own extra rows n <= v < n + E, gradient canaries v >= n + E are skipped: the
 * caller adds their term), with x the row, z = W_m x + b_m, delta = softmax(z) - onehot(y):
 *     norm  = ||delta|| * sqrt(||x||^2 + 1)              (per-example gradient norm, ghost identity)
 *     s     = min(1, clip / (norm + 1e-6)) / ebs          (opacus's clip factor, then 1 / expected batch)
 *     G_m  += (s delta) x^T,  g_b += s delta
 * written to out[m] in the flat parameter layout W (C x d, row-major) then b (C).
 *
 * Sources: DP-SGD's per-example clipping and sum, Abadi et al. 2016, "Deep Learning with Differential
 * Privacy", Algorithm 1 (clip factor and the division by the expected batch size as opacus's
 * DPOptimizer); the per-example gradient of a linear layer is the outer product delta x^T (plus delta
 * for the bias), so its norm is ||delta|| * sqrt(||x||^2 + 1) without materialising it (Goodfellow
 * 2015, "Efficient Per-Example Gradient Computations"; the "ghost clipping" identity of Li et al.
 * 2022, "Large Language Models Can Be Strong Differentially Private Learners", Sec. 4); the same
 * identity as privaudit/train/heads.py, which the tests compare this kernel against.
 *
 * Reproducibility: the order of every floating-point operation is fixed by this code (8 explicit
 * accumulator lanes per dot product, fixed reduction trees, rows in batch order); it is compiled
 * without -ffast-math and with -ffp-contract=off, so a compiler may vectorise but not reorder or
 * fuse, and the result does not depend on the compiler, the SIMD width or the number of threads
 * (a model is computed by one thread). Everything is float32, as in torch's path; the softmax's
 * exponential is the fixed polynomial exp8 below (not libm's, whose last bit may vary by version).
 *
 * Vector width (PA_VW, 8 or 16; native.py picks 16 where the CPU has AVX-512): with 16, the logits
 * of two classes share one 16-lane accumulator per row (lanes 0-7 class c, lanes 8-15 class c + 1,
 * the row's 8 floats broadcast to both halves; W re-laid out per model as class pairs) and the
 * gradient update runs over 16 features at a time. Every lane still computes exactly the sums of
 * the 8-lane code in the same order (the per-lane arithmetic is elementwise IEEE), so both widths
 * give the same bits (tests/train/test_native_kernel.py); only the instruction count changes.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RB 8 /* rows per block */
#define LANES 8 /* accumulator lanes of a dot product */
#define PD 2 /* prefetch distance, in blocks */
#ifndef PA_VW
#define PA_VW 8 /* vector width of the hot loops: 8 or 16 (the same results, see above) */
#endif
#if PA_VW != 8 && PA_VW != 16
#error "PA_VW must be 8 or 16"
#endif

/* 8 floats as one value (GCC/Clang vector extension): elementwise IEEE operations, lowered to AVX,
 * SSE, NEON or scalar code by the compiler — the same results on each. */
typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

static inline v8 load8(const float *p) { v8 v; memcpy(&v, p, sizeof v); return v; }
static inline void store8(float *p, v8 v) { memcpy(p, &v, sizeof v); }
static inline v8 bcast8(float a) { v8 v = {a, a, a, a, a, a, a, a}; return v; }
static inline v8i bcast8i(int32_t a) { v8i v = {a, a, a, a, a, a, a, a}; return v; }
/* lanes of a where mask (all ones or all zeros per lane, from a vector comparison), else b */
static inline v8 blend8(v8i mask, v8 a, v8 b) { return (v8)(((v8i)a & mask) | ((v8i)b & ~mask)); }

#if PA_VW == 16
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
typedef float v16 __attribute__((vector_size(64)));
static inline v16 load16(const float *p) { v16 v; memcpy(&v, p, sizeof v); return v; }
static inline void store16(float *p, v16 v) { memcpy(p, &v, sizeof v); }
static inline v16 bcast16(float a) { v16 v = {a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a}; return v; }
/* 8 floats at p in both halves (one broadcast load on AVX-512) */
static inline v16 dup8(const float *p) {
#if defined(__AVX512F__)
    /* vbroadcastf64x4 from memory: a load, no shuffle (bits moved, never interpreted) */
    return (v16)_mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)p));
#elif defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
    const v8 a = load8(p);
    return __builtin_shufflevector(a, a, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
#else
    v16 v;
    memcpy(&v, p, 32);
    memcpy((char *)&v + 32, p, 32);
    return v;
#endif
}
static inline float tree8lo(v16 a) {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}
static inline float tree8hi(v16 a) {
    return ((a[8] + a[9]) + (a[10] + a[11])) + ((a[12] + a[13]) + (a[14] + a[15]));
}
#endif

/* e^x for x <= 0 (x clamped below at -87: e^-87 ~ 1.6e-38, a normal float), 8 lanes: the Cephes
 * expf polynomial (range reduction by ln 2 in two parts, degree-6 polynomial, 2^n from the exponent
 * bits); about 1 ulp; plain IEEE operations in a fixed order. */
static inline v8 exp8(v8 x) {
    const v8 lo = bcast8(-87.0f);
    x = blend8(x < lo, lo, x);
    const v8 t = x * bcast8(1.44269504088896341f) + bcast8(0.5f);
    v8i ni = __builtin_convertvector(t, v8i); /* truncation toward zero ... */
    ni += __builtin_convertvector(ni, v8) > t; /* ... then floor: a true comparison is -1 */
    const v8 n = __builtin_convertvector(ni, v8);
    const v8 scale = (v8)((ni + bcast8i(127)) << 23);
    const v8 r = (x - n * bcast8(0.693359375f)) - n * bcast8(-2.12194440e-4f);
    v8 p = bcast8(1.9875691500e-4f);
    p = p * r + bcast8(1.3981999507e-3f);
    p = p * r + bcast8(8.3334519073e-3f);
    p = p * r + bcast8(4.1665795894e-2f);
    p = p * r + bcast8(1.6666665459e-1f);
    p = p * r + bcast8(5.0000001201e-1f);
    p = (p * (r * r) + r) + bcast8(1.0f);
    return p * scale;
}

static inline float tree8(v8 a) {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* Models [m0, m1) on the calling thread. Returns 0, or 1 (allocation failed), 2 (a label outside
 * [0, C)), 3 (a row index < 0). */
static int models_range(
    const float *X, const int64_t *y, const float *xsq, int64_t n,
    const float *Xe, const int64_t *ye, const float *xsqe, int64_t E,
    int64_t d, int64_t C,
    const int64_t *idx, const int64_t *counts, int64_t B, int64_t m0, int64_t m1,
    const float *params, float *out, int64_t P, float clipf, float ebsf)
{
    const int64_t d8 = d - d % LANES;
    const int64_t lines = (d * (int64_t)sizeof(float) + 63) / 64;
    const float **rp = malloc(sizeof(float *) * (size_t)(B > 0 ? B : 1));
    int64_t *lab = malloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1));
    float *nsq = malloc(sizeof(float) * (size_t)(B > 0 ? B : 1));
    float *zero = calloc((size_t)d, sizeof(float));
    float *z = malloc(sizeof(float) * (size_t)(RB * C));
    float *s = malloc(sizeof(float) * (size_t)(RB * C));
    const int64_t npair = (C + 1) / 2;
#if PA_VW == 16
    /* W of one model as class pairs: pair p, block k/8 -> 16 floats (class 2p's 8, then class 2p+1's;
     * a missing class 2p+1 of an odd C is zeros, its logits never read) */
    float *Wp = malloc(sizeof(float) * (size_t)(npair * (d8 > 0 ? 2 * d8 : 1)));
#else
    float *Wp = malloc(sizeof(float));
#endif
    int status = 0;
    if (!rp || !lab || !nsq || !zero || !z || !s || !Wp) { status = 1; goto done; }

    for (int64_t m = m0; m < m1 && status == 0; m++) {
        const float *W = params + m * P, *bias = W + C * d;
        float *G = out + m * P, *gb = G + C * d;
        memset(G, 0, sizeof(float) * (size_t)P);
        const int64_t *im = idx + m * B;
        int64_t nd = 0;
        for (int64_t k = 0; k < counts[m]; k++) {
            int64_t v = im[k];
            if (v < 0) { status = 3; break; }
            if (v < n) { rp[nd] = X + v * d; lab[nd] = y[v]; nsq[nd] = xsq[v]; }
            else if (v < n + E) {
                int64_t j = m * E + (v - n);
                rp[nd] = Xe + j * d; lab[nd] = ye[j]; nsq[nd] = xsqe[j];
            } else continue; /* a gradient canary */
            if (lab[nd] < 0 || lab[nd] >= C) { status = 2; break; }
            nd++;
        }
        if (status) break;
#if PA_VW == 16
        for (int64_t p = 0; p < npair; p++)
            for (int64_t k = 0; k < d8; k += LANES) {
                float *dst = Wp + (p * d8 + k) * 2;
                memcpy(dst, W + 2 * p * d + k, sizeof(float) * LANES);
                if (2 * p + 1 < C) memcpy(dst + LANES, W + (2 * p + 1) * d + k, sizeof(float) * LANES);
                else memset(dst + LANES, 0, sizeof(float) * LANES);
            }
#endif
        for (int64_t r0 = 0; r0 < nd; r0 += RB) {
            const int64_t nr = nd - r0 < RB ? nd - r0 : RB;
            const float *xr[RB];
            for (int r = 0; r < RB; r++) xr[r] = r < nr ? rp[r0 + r] : zero;
            const int64_t pf = r0 + PD * RB; /* rows PD blocks ahead, prefetched over the class loop */
#if PA_VW == 16
            for (int64_t p = 0; p < npair; p++) {
                /* lines t = p, p + npair, ... of the RB rows ahead: row t / lines, line t % lines, kept
                 * as a running (row, line) pair (no division per prefetch) */
                for (int64_t t = p, tr = p / lines, tl = p % lines; t < RB * lines; t += npair) {
                    if (pf + tr < nd) __builtin_prefetch((const char *)rp[pf + tr] + 64 * tl, 0, 1);
                    for (tl += npair; tl >= lines; tl -= lines) tr++;
                }
                const float *wp = Wp + p * d8 * 2;
                const int64_t c0 = 2 * p, c1 = 2 * p + 1;
                v16 acc[RB];
                for (int r = 0; r < RB; r++) acc[r] = bcast16(0.0f);
                for (int64_t k = 0; k < d8; k += LANES) {
                    const v16 wv = load16(wp + 2 * k);
                    for (int r = 0; r < RB; r++) acc[r] += wv * dup8(xr[r] + k);
                }
                for (int64_t k = d8; k < d; k++)
                    for (int r = 0; r < RB; r++) {
                        acc[r][k - d8] += W[c0 * d + k] * xr[r][k];
                        if (c1 < C) acc[r][LANES + k - d8] += W[c1 * d + k] * xr[r][k];
                    }
                for (int r = 0; r < RB; r++) z[c0 * RB + r] = tree8lo(acc[r]) + bias[c0];
                if (c1 < C)
                    for (int r = 0; r < RB; r++) z[c1 * RB + r] = tree8hi(acc[r]) + bias[c1];
            }
#else
            for (int64_t c = 0; c < C; c++) {
                /* lines t = c, c + C, ... of the RB rows ahead: row t / lines, line t % lines, kept
                 * as a running (row, line) pair (no division per prefetch) */
                for (int64_t t = c, tr = c / lines, tl = c % lines; t < RB * lines; t += C) {
                    if (pf + tr < nd) __builtin_prefetch((const char *)rp[pf + tr] + 64 * tl, 0, 1);
                    for (tl += C; tl >= lines; tl -= lines) tr++;
                }
                const float *w = W + c * d;
                v8 acc[RB];
                for (int r = 0; r < RB; r++) acc[r] = bcast8(0.0f);
                for (int64_t k = 0; k < d8; k += LANES) {
                    const v8 wv = load8(w + k);
                    for (int r = 0; r < RB; r++) acc[r] += wv * load8(xr[r] + k);
                }
                for (int64_t k = d8; k < d; k++)
                    for (int r = 0; r < RB; r++) acc[r][k - d8] += w[k] * xr[r][k];
                for (int r = 0; r < RB; r++) z[c * RB + r] = tree8(acc[r]) + bias[c];
            }
#endif
            /* softmax, delta, per-example norm and clip factor of the block's rows, one row per lane */
            v8 mx = load8(z), tot = bcast8(0.0f), sq = bcast8(0.0f), xs = bcast8(0.0f), f = bcast8(0.0f);
            v8i labv = bcast8i(-1);
            for (int j = 0; j < nr; j++) { labv[j] = (int32_t)lab[r0 + j]; xs[j] = nsq[r0 + j]; }
            for (int64_t c = 1; c < C; c++) {
                const v8 zc = load8(z + c * RB);
                mx = blend8(zc > mx, zc, mx);
            }
            for (int64_t c = 0; c < C; c++) {
                const v8 ec = exp8(load8(z + c * RB) - mx);
                store8(s + c * RB, ec);
                tot += ec;
            }
            for (int64_t c = 0; c < C; c++) {
                const v8 hot = blend8(labv == bcast8i((int32_t)c), bcast8(1.0f), bcast8(0.0f));
                const v8 dc = load8(s + c * RB) / tot - hot;
                store8(s + c * RB, dc);
                sq += dc * dc;
            }
            const v8 nrm2 = sq * (xs + bcast8(1.0f));
            for (int j = 0; j < nr; j++) {
                float fj = clipf / (sqrtf(nrm2[j]) + 1e-6f);
                f[j] = (fj > 1.0f ? 1.0f : fj) / ebsf;
            }
            for (int64_t c = 0; c < C; c++) store8(s + c * RB, load8(s + c * RB) * f);
            for (int64_t c = 0; c < C; c++) {
                float *g = G + c * d;
                const float *sc = s + c * RB;
                const float s0 = sc[0], s1 = sc[1], s2 = sc[2], s3 = sc[3], s4 = sc[4], s5 = sc[5], s6 = sc[6], s7 = sc[7];
                const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
                const float *x4 = xr[4], *x5 = xr[5], *x6 = xr[6], *x7 = xr[7];
                const v8 t0 = bcast8(s0), t1 = bcast8(s1), t2 = bcast8(s2), t3 = bcast8(s3);
                const v8 t4 = bcast8(s4), t5 = bcast8(s5), t6 = bcast8(s6), t7 = bcast8(s7);
                int64_t k0 = 0;
#if PA_VW == 16
                {
                    const v16 u0 = bcast16(s0), u1 = bcast16(s1), u2 = bcast16(s2), u3 = bcast16(s3);
                    const v16 u4 = bcast16(s4), u5 = bcast16(s5), u6 = bcast16(s6), u7 = bcast16(s7);
                    for (; k0 + 16 <= d8; k0 += 16)
                        store16(g + k0, load16(g + k0)
                                + (((u0 * load16(x0 + k0) + u1 * load16(x1 + k0)) + (u2 * load16(x2 + k0) + u3 * load16(x3 + k0)))
                                   + ((u4 * load16(x4 + k0) + u5 * load16(x5 + k0)) + (u6 * load16(x6 + k0) + u7 * load16(x7 + k0)))));
                }
#endif
                for (int64_t k = k0; k < d8; k += LANES)
                    store8(g + k, load8(g + k)
                           + (((t0 * load8(x0 + k) + t1 * load8(x1 + k)) + (t2 * load8(x2 + k) + t3 * load8(x3 + k)))
                              + ((t4 * load8(x4 + k) + t5 * load8(x5 + k)) + (t6 * load8(x6 + k) + t7 * load8(x7 + k)))));
                for (int64_t k = d8; k < d; k++)
                    g[k] += ((s0 * x0[k] + s1 * x1[k]) + (s2 * x2[k] + s3 * x3[k]))
                          + ((s4 * x4[k] + s5 * x5[k]) + (s6 * x6[k] + s7 * x7[k]));
                for (int r = 0; r < nr; r++) gb[c] += sc[r];
            }
        }
    }
done:
    free(rp); free(lab); free(nsq); free(zero); free(z); free(s); free(Wp);
    return status;
}

/* Models [m0, m1) split into `threads` contiguous ranges, one per OpenMP thread (the process's
 * OpenMP runtime: inside torch, torch's own libgomp and its thread pool); a model is always computed
 * whole by one thread, so the results do not depend on `threads`. Returns the first nonzero status. */
int privaudit_linear_dp_clipped_sum(
    const float *X, const int64_t *y, const float *xsq, int64_t n,
    const float *Xe, const int64_t *ye, const float *xsqe, int64_t E,
    int64_t d, int64_t C,
    const int64_t *idx, const int64_t *counts, int64_t B, int64_t m0, int64_t m1,
    const float *params, float *out, int64_t P, float clipf, float ebsf, int64_t threads)
{
    const int64_t M = m1 - m0;
    int64_t k = threads < 1 ? 1 : threads;
    if (k > M) k = M > 0 ? M : 1;
    int status = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 1) num_threads((int)k) reduction(max : status)
#endif
    for (int64_t t = 0; t < k; t++) {
        int st = models_range(X, y, xsq, n, Xe, ye, xsqe, E, d, C, idx, counts, B,
                              m0 + M * t / k, m0 + M * (t + 1) / k, params, out, P, clipf, ebsf);
        if (st > status) status = st;
    }
    return status;
}
