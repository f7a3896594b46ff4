/* Cross-entropy over a vocabulary with its gradient, in three passes over the logits (PyTorch's log_softmax +
 * nll_loss and their backwards take about six, more with label smoothing). Built with score.c (text_attn/core/native.py).
 *
 * x (R, C) logits, float32, contiguous; target (R) int64; rows whose target is ``ignore`` count for nothing. With
 * label smoothing ε, a row's loss is (1 − ε)(lse − x_t) + ε(lse − mean_c x_c), lse = log Σ_c e^{x_c}: PyTorch's
 * F.cross_entropy(label_smoothing=ε) per row. Writes loss_rows (R) and grad (R, C) = ∂(row loss)/∂x
 * = softmax(x) − (1 − ε) onehot(t) − ε / C (zeros for ignored rows); the caller scales by its reduction. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vector.h"

void ta_cross_entropy(const float *x, const int64_t *target, int64_t R, int64_t C, int64_t ignore, float eps,
                      float *loss_rows, float *grad, int threads) {
    const int64_t full = C - C % W;
    if (threads < 1) threads = 1;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float *gr = grad + r * C;
        const int64_t t = target[r];
        if (t == ignore || t < 0 || t >= C) { /* out-of-range targets are refused before the call */
            memset(gr, 0, (size_t)C * sizeof(float));
            loss_rows[r] = 0.f;
            continue;
        }
        /* pass 1: the max */
        vf vmax = splat(-INFINITY);
        for (int64_t c = 0; c < full; c += W) {
            vf v = load(xr + c);
            vmax = pick(v > vmax, v, vmax);
        }
        float m = -INFINITY;
        for (int i = 0; i < W; i++) m = vmax[i] > m ? vmax[i] : m;
        for (int64_t c = full; c < C; c++) m = xr[c] > m ? xr[c] : m;
        /* pass 2: e^{x − max} into grad, their sum z and Σ (x − max); log p_c = (x_c − max) − log z, computed so,
         * without max + log z (large logits would lose log z's digits) */
        vf vz = splat(0.f), vs = splat(0.f);
        for (int64_t c = 0; c < full; c += W) {
            vf d = load(xr + c) - splat(m);
            vf e = v_exp(d);
            store(gr + c, e);
            vz += e;
            vs += d;
        }
        float z = lanes_sum(vz), shifted = lanes_sum(vs);
        for (int64_t c = full; c < C; c++) {
            float e = expf(xr[c] - m);
            gr[c] = e;
            z += e;
            shifted += xr[c] - m;
        }
        const float logz = logf(z);
        /* the smoothing term only when asked for: a −inf logit (a word masked out) makes it −inf, and 0 · inf = NaN */
        float loss = (1.f - eps) * (logz - (xr[t] - m));
        if (eps != 0.f) loss += eps * (logz - shifted / (float)C);
        loss_rows[r] = loss;
        /* pass 3: softmax − smoothed target */
        const float inv = 1.f / z, off = eps / (float)C;
        for (int64_t c = 0; c < full; c += W) store(gr + c, load(gr + c) * splat(inv) - splat(off));
        for (int64_t c = full; c < C; c++) gr[c] = gr[c] * inv - off;
        gr[t] -= 1.f - eps;
    }
}
