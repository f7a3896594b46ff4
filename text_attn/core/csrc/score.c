/* The additive attention score of one decoder step, e = vᵀ tanh(p + q), and its backward, in one pass over memory
 * each. Compiled on first use by text_attn/core/native.py (the system's C compiler, -O3 -march=native) and called
 * through ctypes; without a compiler text_attn/core/fused.py computes the same in several PyTorch passes.
 *
 * Why: PyTorch needs four passes per step for the forward (add, sigmoid, product with v, ...) and five for the
 * backward, each a read or write of a (N, S, A) block; here every element is read once and written at most once.
 *
 * Layouts (float32, contiguous): p (B, S, A) the projected keys; q (N, A) the step's projected queries, N = g·B (query
 * row n reads keys row n / g: beam search's g beams share an image); v (A); e (N, S); keep (N, S, A) or NULL: σ(2x),
 * what the backward needs (tanh(x) = 2σ(2x) − 1, tanh'(x) = 4σ(2x)(1 − σ(2x))).
 *
 * Deterministic: GCC vector extensions, explicit lanes, no alignment-dependent peeling; the sums over A run in a fixed
 * order, so a row gives the same bits wherever it sits in memory (batched and per-image beam search agree). Only the
 * backward's dv (a sum over all rows, split between the threads) depends on the thread count, in its last bits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector.h"

/* σ(2(p + q)) for W lanes */
static inline vf v_sig2(vf p, vf q) { return splat(1.f) / (splat(1.f) + v_exp(splat(-2.f) * (p + q))); }

void ta_score_forward(const float *p, const float *q, const float *v, float *keep, float *e, int64_t N, int64_t S,
                      int64_t A, int64_t g, int threads) {
    const int64_t full = A - A % W, rest = A % W;
    if (threads < 1) threads = 1;
    float vsum = 0.f;
    for (int64_t a = 0; a < A; a++) vsum += v[a];
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < N * S; r++) {
        const int64_t n = r / S, s = r % S;
        const float *pr = p + ((n / g) * S + s) * A, *qr = q + n * A;
        float *kr = keep ? keep + r * A : NULL;
        vf acc = splat(0.f);
        for (int64_t a = 0; a < full; a += W) {
            vf sg = v_sig2(load(pr + a), load(qr + a));
            if (kr) store(kr + a, sg);
            acc += load(v + a) * sg;
        }
        float total = lanes_sum(acc);
        if (rest) { /* v's zero lanes leave the sum unchanged */
            vf sg = v_sig2(load_tail(pr + full, rest), load_tail(qr + full, rest));
            if (kr) memcpy(kr + full, &sg, (size_t)rest * sizeof(float));
            total += lanes_sum(load_tail(v + full, rest) * sg);
        }
        e[r] = 2.f * total - vsum; /* vᵀ tanh(x) = 2 vᵀσ(2x) − Σv */
    }
}

/* The backward of ta_score_forward for g = 1, from de (N, S) = ∂L/∂e and keep = σ:
 *   y = de · σ(1 − σ);   dx (N, S, A) = 4v · y, added into dx when ``accumulate`` (the steps of a sequence sum their
 *   keys' gradient in one buffer);   dq (N, A) = 4v · Σ_s y;   dv (A) = 2 Σ de · σ − Σ de. */
int ta_score_backward(const float *sig, const float *de, const float *v, float *dx, int accumulate, float *dq,
                      float *dv, int64_t N, int64_t S, int64_t A, int threads) {
    const int64_t groups = (A + W - 1) / W, full = A / W, rest = A % W;
    if (threads < 1) threads = 1;
    if (groups == 0) return 0; /* A = 0: dq and dv are empty */
    /* vector-aligned (malloc's 16 bytes are not enough for 32-byte vectors) */
    vf *part = aligned_alloc(sizeof(vf), (size_t)(threads * groups) * sizeof(vf)); /* per thread: Σ de · σ */
    vf *sums = aligned_alloc(sizeof(vf), (size_t)(threads * groups) * sizeof(vf)); /* per thread: Σ_s y of a row */
    vf *v4 = aligned_alloc(sizeof(vf), (size_t)groups * sizeof(vf));
    if (!part || !sums || !v4) {
        free(part), free(sums), free(v4);
        return 1;
    }
    for (int64_t j = 0; j < threads * groups; j++) part[j] = splat(0.f);
    for (int64_t j = 0; j < groups; j++) v4[j] = splat(4.f) * (j < full ? load(v + j * W) : load_tail(v + j * W, rest));
#pragma omp parallel num_threads(threads)
    {
#ifdef _OPENMP
        extern int omp_get_thread_num(void);
        const int tid = omp_get_thread_num();
#else
        const int tid = 0;
#endif
        vf *dvp = part + tid * groups, *yq = sums + tid * groups;
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; n++) {
            for (int64_t j = 0; j < groups; j++) yq[j] = splat(0.f);
            for (int64_t s = 0; s < S; s++) {
                const float *sr = sig + (n * S + s) * A;
                float *xr = dx + (n * S + s) * A;
                const vf d = splat(de[n * S + s]);
                for (int64_t j = 0; j < groups; j++) {
                    const int64_t a = j * W;
                    const vf sg = j < full ? load(sr + a) : load_tail(sr + a, rest);
                    const vf y = d * (sg - sg * sg);
                    yq[j] += y;
                    dvp[j] += d * sg;
                    vf out = v4[j] * y;
                    if (j < full) {
                        store(xr + a, accumulate ? load(xr + a) + out : out);
                    } else {
                        if (accumulate) out += load_tail(xr + a, rest);
                        memcpy(xr + a, &out, (size_t)rest * sizeof(float));
                    }
                }
            }
            for (int64_t j = 0; j < groups; j++) {
                vf out = v4[j] * yq[j];
                memcpy(dq + n * A + j * W, &out, (size_t)(j < full ? W : rest) * sizeof(float));
            }
        }
    }
    double desum = 0.; /* in double: N·S terms */
    for (int64_t i = 0; i < N * S; i++) desum += de[i];
    for (int64_t j = 0; j < groups; j++) {
        vf t = splat(0.f);
        for (int i = 0; i < threads; i++) t += part[i * groups + j];
        vf out = splat(2.f) * t - splat((float)desum);
        memcpy(dv + j * W, &out, (size_t)(j < full ? W : rest) * sizeof(float));
    }
    free(part), free(sums), free(v4);
    return 0;
}
