/* privaudit — DP-SGD's Gaussian noise for M models, one independent stream per model.
 *
 * Built into the same library as linear_dp.c by privaudit/train/native.py (see its docstring).
 *
 * out[m, j] = scale * z[m, j], z i.i.d. N(0, 1), for m in [0, M), j in [0, P):
 *   stream  model m's 64-bit words come from xoshiro256++ (Blackman & Vigna 2021, "Scrambled Linear
 *           Pseudorandom Number Generators", ACM TOMS 47(4)), its 256-bit state filled by SplitMix64
 *           from (seed, m) as the authors recommend for seeding; the seed is drawn from the trainer's
 *           torch.Generator once per step, so the numbers depend only on that generator and M.
 *   normals one 64-bit word gives one pair by the Box-Muller transform (Box & Muller 1958, "A Note on
 *           the Generation of Random Normal Deviates", Ann. Math. Statist. 29(2)):
 *               r = sqrt(-2 ln u1),  (z0, z1) = (r cos theta, r sin theta),  theta uniform on [0, 2 pi)
 *           eight words at a time, read as 16 32-bit halves: u1 = (k + 1/2) 2^-31 from the top 31 bits of
 *           one half (in (0, 1]; the largest |z| it can give is sqrt(2 ln 2^32) = 6.66, torch's float32 CPU
 *           sampler stops near 5.8); theta = q pi/2 + y from another half, the quadrant q from its top 2
 *           bits and y = (t - 1/2) pi/2 with t from its low 29 bits, so cos and sin come from the
 *           polynomials on |y| <= pi/4 with exact quadrant swaps (no range reduction).
 *   ln, sin, cos: the Cephes single-precision polynomials (logf, sinf, cosf; about 1 ulp), plain IEEE
 *           operations in a fixed order, as exp8 in linear_dp.c; sqrt is IEEE's correctly rounded one.
 *
 * Reproducibility: a model's numbers are computed by one thread in a fixed order; with
 * -ffp-contract=off and no fast-math the bits do not depend on the SIMD width, the compiler or the
 * number of threads (tests/train/test_gaussian_noise.py). Everything is float32.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef float g8 __attribute__((vector_size(32)));
typedef int32_t g8i __attribute__((vector_size(32)));
typedef uint32_t g8u __attribute__((vector_size(32)));

static inline g8 gb8(float a) { g8 v = {a, a, a, a, a, a, a, a}; return v; }
static inline g8i gb8i(int32_t a) { g8i v = {a, a, a, a, a, a, a, a}; return v; }
static inline g8u gb8u(uint32_t a) { g8u v = {a, a, a, a, a, a, a, a}; return v; }
static inline g8 gblend(g8i mask, g8 a, g8 b) { return (g8)(((g8i)a & mask) | ((g8i)b & ~mask)); }

static inline uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t xoshiro256pp(uint64_t s[4]) {
    const uint64_t result = rotl64(s[0] + s[3], 23) + s[0];
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* ln x for x in (0, 1], 8 lanes: Cephes logf (x = m 2^e, m in [sqrt(1/2), sqrt(2)), degree-9 polynomial
 * in m - 1, e ln 2 added in two parts). */
static inline g8 log8(g8 x) {
    g8i bits = (g8i)x;
    g8i e = ((bits >> 23) & gb8i(0xff)) - gb8i(126); /* x = f 2^e with f in [0.5, 1) */
    g8 f = (g8)((bits & gb8i(0x007fffff)) | gb8i(0x3f000000));
    const g8i small = f < gb8(0.707106781186547524f);
    e -= small & gb8i(1);                         /* a true comparison is -1: e - 1 where f < sqrt(1/2) */
    f = gblend(small, f + f, f) - gb8(1.0f);
    const g8 ef = __builtin_convertvector(e, g8);
    const g8 z = f * f;
    /* the degree-8 polynomial in f, Estrin's scheme (pairs, then f^2, f^4): a shorter dependency chain */
    const g8 z2 = z * z;
    const g8 q0 = gb8(-2.4999993993e-1f) * f + gb8(3.3333331174e-1f);
    const g8 q1 = gb8(-1.6668057665e-1f) * f + gb8(2.0000714765e-1f);
    const g8 q2 = gb8(-1.2420140846e-1f) * f + gb8(1.4249322787e-1f);
    const g8 q3 = gb8(-1.1514610310e-1f) * f + gb8(1.1676998740e-1f);
    const g8 p = ((gb8(7.0376836292e-2f) * z2) * z2 + (q3 * z + q2) * z2) + (q1 * z + q0);
    g8 y = (f * z) * p;
    y = y + ef * gb8(-2.12194440e-4f);
    y = y - z * gb8(0.5f);
    return (f + y) + ef * gb8(0.693359375f);
}

/* 8 pairs of normals from 8 64-bit words (read as 16 32-bit halves: the first 8 give u1, the last 8 the
 * angle), scaled: z0 of the pairs to out[0..7], z1 to out[8..15]. */
static inline void pairs8(const uint64_t *w, float scale, float *out) {
    g8u a, b;
    memcpy(&a, w, sizeof a);
    memcpy(&b, (const char *)w + sizeof a, sizeof b);
    const g8 u1 = __builtin_convertvector((g8i)(a >> 1), g8) * gb8(4.656612873077392578125e-10f) /* 2^-31 */
                  + gb8(2.3283064365386962890625e-10f);                                         /* 2^-32 */
    const g8 l = log8(u1) * gb8(-2.0f);
    g8 r;
    for (int i = 0; i < 8; i++) r[i] = sqrtf(l[i]);
    const g8i quad = (g8i)(b >> 30);
    const g8 t = __builtin_convertvector((g8i)(b & gb8u(0x1fffffffu)), g8) * gb8(1.86264514923095703125e-9f); /* 2^-29 */
    const g8 y = (t - gb8(0.5f)) * gb8(1.57079632679489661923f);
    const g8 z = y * y;
    const g8 s = ((gb8(-1.9515295891e-4f) * z + gb8(8.3321608736e-3f)) * z + gb8(-1.6666654611e-1f)) * z * y + y;
    const g8 c = ((gb8(2.443315711809948e-5f) * z + gb8(-1.388731625493765e-3f)) * z + gb8(4.166664568298827e-2f))
                 * z * z - z * gb8(0.5f) + gb8(1.0f);
    /* theta = quad pi/2 + y: (cos, sin) = (c, s), (-s, c), (-c, -s), (s, -c) */
    const g8i odd = (quad & gb8i(1)) != gb8i(0);
    const g8 cs = gblend(odd, s, c), sn = gblend(odd, c, s);
    const g8i negc = (quad == gb8i(1)) | (quad == gb8i(2));
    const g8i negs = (quad == gb8i(2)) | (quad == gb8i(3));
    const g8 cosv = gblend(negc, -cs, cs), sinv = gblend(negs, -sn, sn);
    const g8 z0 = (r * cosv) * gb8(scale), z1 = (r * sinv) * gb8(scale);
    memcpy(out, &z0, sizeof z0);
    memcpy(out + 8, &z1, sizeof z1);
}

static void model_stream(uint64_t seed, int64_t m, int64_t P, float scale, float *out, uint64_t *w) {
    uint64_t x = seed ^ splitmix64(&(uint64_t){(uint64_t)m});
    uint64_t s[4];
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
    const int64_t groups = (P + 15) / 16;
    for (int64_t i = 0; i < 8 * groups; i++) w[i] = xoshiro256pp(s);
    int64_t g = 0;
    for (; g < P / 16; g++) pairs8(w + 8 * g, scale, out + 16 * g);
    if (g < groups) { /* the last < 16 values: a whole group computed, its first P - 16 g kept */
        float tail[16];
        pairs8(w + 8 * g, scale, tail);
        memcpy(out + 16 * g, tail, sizeof(float) * (size_t)(P - 16 * g));
    }
}

/* out (M, P) row-major; models split into `threads` contiguous ranges (OpenMP), each model computed whole
 * by one thread. Returns 0. */
int privaudit_gaussian_fill(uint64_t seed, int64_t M, int64_t P, float scale, float *out, int64_t threads) {
    int64_t k = threads < 1 ? 1 : threads;
    if (k > M) k = M > 0 ? M : 1;
#ifdef _OPENMP
#endif
    int status = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 1) num_threads((int)k) reduction(max : status)
#endif
    for (int64_t t = 0; t < k; t++) {
        uint64_t *w = malloc(sizeof(uint64_t) * (size_t)(8 * ((P + 15) / 16) + 1));
        if (!w) { status = 1; continue; }
        for (int64_t m = M * t / k; m < M * (t + 1) / k; m++) model_stream(seed, m, P, scale, out + m * P, w);
        free(w);
    }
    return status;
}
