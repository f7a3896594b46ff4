/* What score.c and cross_entropy.c share: 8-lane float vectors (GCC/Clang vector extensions; unaligned loads and
 * stores through memcpy, so no code depends on alignment), a lane select, a fixed-order lane sum, and e^x. */
#ifndef TA_VECTOR_H
#define TA_VECTOR_H
#include <stdint.h>
#include <string.h>

#define W 8 /* lanes: one AVX register; split in two by compilers for narrower vector units */
typedef float vf __attribute__((vector_size(4 * W)));
typedef int32_t vi __attribute__((vector_size(4 * W)));

static inline vf splat(float x) { return (vf){x, x, x, x, x, x, x, x}; }
static inline vf load(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void store(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline vf pick(vi mask, vf a, vf b) { return (vf)((mask & (vi)a) | (~mask & (vi)b)); }
static inline float lanes_sum(vf v) {
    float s = 0.f;
    for (int i = 0; i < W; i++) s += v[i];
    return s;
}

/* e^x, Cephes' expf: 2^n · e^r with |r| <= ln2 / 2, a degree-7 polynomial (about 1 ulp); NaN stays NaN. */
static inline vf v_exp(vf x) {
    /* within ±87, 2^n stays a normal float: σ = 1 / (1 + e^x) >= 1.6e-38 (no denormals); in a softmax, e^(x − max)
     * below e^−87 is nothing next to the row's e^0 */
    x = pick(x > splat(87.f), splat(87.f), x);
    x = pick(x < splat(-87.f), splat(-87.f), x);
    const vf magic = splat(12582912.f);            /* 1.5 · 2^23: adding it rounds to an integer */
    vf t = x * splat(1.44269504088896341f) + magic;
    vf n = t - magic;
    vf r = x - n * splat(0.693359375f) - n * splat(-2.12194440e-4f);
    vf y = splat(1.9875691500e-4f);
    y = y * r + splat(1.3981999507e-3f);
    y = y * r + splat(8.3334519073e-3f);
    y = y * r + splat(4.1665795894e-2f);
    y = y * r + splat(1.6666665459e-1f);
    y = y * r + splat(5.0000001201e-1f);
    y = y * (r * r) + r + splat(1.f);
    vi scale = ((vi)t - (vi)magic + 127) << 23; /* the bits of 2^n */
    return y * (vf)scale;
}

/* Loads of a last, partial group of lanes (n < W of them), zeros elsewhere. */
static inline vf load_tail(const float *p, int64_t n) {
    vf v = splat(0.f);
    memcpy(&v, p, (size_t)n * sizeof(float));
    return v;
}

#endif
