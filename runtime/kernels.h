/* Implements: every per-element, per-row and per-column piece of math of the runtime, written
 * once (style.md "CPU and GPU share the math"). The host backend loops over these functions;
 * the CUDA backend calls them from one thread per element, row or column. What the CPU
 * finite-difference and PyTorch tests prove about them therefore holds for the GPU code.
 *
 * Conventions: row-major; N rows (tokens), M columns (features); "acc" arguments accumulate. */
#ifndef RT_KERNELS_H
#define RT_KERNELS_H

#include "real.h"
#include <math.h>

#if REAL_IS_DOUBLE
#define RT_LOG log
#define RT_TANH tanh
#define RT_SQRT sqrt
#else
#define RT_LOG logf
#define RT_TANH tanhf
#define RT_SQRT sqrtf
#endif

#define RT_EXP k_exp /* below: a vectorisable expf in fp32 */

#define RT_LN_EPS ((real)1e-5)

/* ---- exp ----
 * fp32: Cephes' expf (Cody-Waite reduction x = n·ln2 + r, degree-5 polynomial, 2^n by building
 * the exponent bits), straight-line code that vectorises on the host and runs as is on CUDA.
 * The argument is clamped to [-80, 80]: every caller (softmax, cross-entropy, sigmoid, GELU)
 * only needs exp where it is not swamped by a 1 added to it, and e^±80 keeps the results and
 * their reciprocals normal floats. That matters for speed, not accuracy: gcc evaluates both
 * sides of a clamp for every vector lane, and with libm's range (e^88.7) the saturated side's
 * x/(1 + e^88.7) is a denormal, which costs a microcode assist per vector (a 15x slower GELU).
 * Relative error below 2e-7 inside the range (test_runtime_kernels). The fp64 test build keeps
 * libm's exp. */
FSMOE_HD real k_exp(real x)
{
#if REAL_IS_DOUBLE
    return exp(x);
#else
    x = x > 80.0f ? 80.0f : x;
    x = x < -80.0f ? -80.0f : x;
    /* n = round(x·log2 e) by the 1.5·2^23 trick (exact for |n| < 2^22) */
    float n = x * 1.44269504088896341f + 12582912.0f;
    n = n - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        int i;
        float f;
    } two_n;
    /* NaN stays in r (and so in p); n itself must be a number before the int conversion,
     * which is undefined for NaN. A select, so the loop still vectorises. */
    n = n == n ? n : 0.0f;
    two_n.i = ((int)n + 127) << 23;
    return p * two_n.f;
#endif
}

/* ---- activations (GPT-2's tanh GELU, PyTorch gelu(approximate='tanh')) ----
 * gelu(x) = ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³), computed as x·σ(2u) with
 * σ(z) = 1/(1 + e^(−z)) (the same function: ½(1 + tanh u) = σ(2u)). This form needs one k_exp
 * and no tanh call, vectorises, and has no cancellation in the negative tail where 1 + tanh u
 * loses its digits; relative error below 1e-6 in fp32 (test_runtime_kernels). */
FSMOE_HD real k_gelu(real x)
{
    const real c2 = (real)(2 * 0.7978845608028654); /* 2·sqrt(2/pi) */
    real z = c2 * (x + (real)0.044715 * x * x * x);
    return x / ((real)1 + RT_EXP(-z));
}

/* d gelu/dx = σ + x·σ(1−σ)·dz/dx with σ = σ(2u), z = 2u (½(1 − tanh² u)·du = σ(1−σ)·dz). */
FSMOE_HD real k_gelu_grad(real x)
{
    const real c2 = (real)(2 * 0.7978845608028654);
    real x2 = x * x;
    real z = c2 * (x + (real)0.044715 * x2 * x);
    real sg = (real)1 / ((real)1 + RT_EXP(-z));
    real dz = c2 * ((real)1 + (real)3 * (real)0.044715 * x2);
    return sg + x * sg * ((real)1 - sg) * dz;
}

FSMOE_HD real k_sigmoid(real x) { return (real)1 / ((real)1 + RT_EXP(-x)); }

FSMOE_HD real k_silu(real x) { return x * k_sigmoid(x); }

FSMOE_HD real k_silu_grad(real x)
{
    real s = k_sigmoid(x);
    return s * ((real)1 + x * ((real)1 - s));
}

/* Expert activation on element i with the first GEMM's bias fused in: a[i] += b (a keeps the
 * pre-activation for the backward), then kind 0 = GPT (h = gelu(a)), 1 = SwiGLU
 * (h = silu(a)·g; b is 0 there). */
FSMOE_HD void k_act_fwd(int kind, long i, real *h, real *a, const real *g, real b)
{
    real x = a[i] + b;
    a[i] = x;
    if (kind == 0)
        h[i] = k_gelu(x);
    else
        h[i] = k_silu(x) * g[i];
}

/* Gradients of k_act_fwd: da (and dg for SwiGLU) from dh. Overwrites. */
FSMOE_HD void k_act_bwd(int kind, long i, real *da, real *dg, const real *dh, const real *a,
                        const real *g)
{
    if (kind == 0) {
        da[i] = dh[i] * k_gelu_grad(a[i]);
    } else {
        da[i] = dh[i] * g[i] * k_silu_grad(a[i]);
        dg[i] = dh[i] * k_silu(a[i]);
    }
}

/* ---- embedding: out[n,:] = wte[tok[n],:] + wpe[n % L,:] ----
 * Vocabulary-parallel (Megatron-LM's VocabParallelEmbedding): a rank holding a slice of the
 * vocabulary gets tok[n] < 0 for a token of another rank's slice and reads a zero row; wpe NULL
 * adds no position embedding (one member of the slice group adds it, so that the sum over the
 * members has it once). Pointers are offset only when used: wte + (negative)·M and NULL + k are
 * undefined. */
FSMOE_HD real k_embed_elem(long n, long m, const real *wte, const real *wpe, const int *tok,
                           long L, long M)
{
    int t = tok[n];
    if (t >= 0 && wpe)
        return wte[(long)t * M + m] + wpe[(n % L) * M + m];
    if (t >= 0)
        return wte[(long)t * M + m];
    return wpe ? wpe[(n % L) * M + m] : (real)0;
}

/* Row n (the host walks rows; the CUDA backend runs one thread per element). */
FSMOE_HD void k_embed_fwd(long n, real *out, const real *wte, const real *wpe, const int *tok,
                          long L, long M)
{
    for (long m = 0; m < M; m++)
        out[n * M + m] = k_embed_elem(n, m, wte, wpe, tok, L, M);
}

/* Element (l, m) of the position-embedding gradient (a reduction over the B samples). */
FSMOE_HD void k_wpe_grad_elem(long l, long m, real *dwpe, const real *dout, long B, long L, long M)
{
    real s = 0;
    for (long b = 0; b < B; b++)
        s += dout[(b * L + l) * M + m];
    dwpe[l * M + m] += s;
}

/* Row l of the same (the host walks it; the CUDA backend runs one thread per element). */
FSMOE_HD void k_wpe_grad_col(long l, real *dwpe, const real *dout, long B, long L, long M)
{
    for (long m = 0; m < M; m++)
        k_wpe_grad_elem(l, m, dwpe, dout, B, L, M);
}

/* ---- reductions of one row in a fixed order of K_LANES partial sums ----
 * Element j goes to partial j % K_LANES; the partials are combined pairwise at the end. A
 * sequential sum (s += x[j]) is one chain of dependent additions that the compiler may not
 * reorder (floating-point addition does not associate), so it neither vectorises nor
 * pipelines; with fixed lanes it does both, and the result is the same on every build and
 * device (fp32: it differs from the sequential order in the last bits, as any other order
 * would). Used by the softmaxes, LayerNorm and cross-entropy. */
#define K_LANES 8

FSMOE_HD real k_lanes_combine(real *acc)
{
    for (int w = K_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++)
            acc[l] += acc[l + w];
    return acc[0];
}

/* Σ_j x[j] */
FSMOE_HD real k_sum(const real *x, long n)
{
    real acc[K_LANES] = {0};
    long j = 0;
    for (; j + K_LANES <= n; j += K_LANES)
        for (int l = 0; l < K_LANES; l++)
            acc[l] += x[j + l];
    for (int l = 0; l < K_LANES && j + l < n; l++)
        acc[l] += x[j + l];
    return k_lanes_combine(acc);
}

/* Σ_j (x[j] − c)² */
FSMOE_HD real k_sum_sq_dev(const real *x, real c, long n)
{
    real acc[K_LANES] = {0};
    long j = 0;
    for (; j + K_LANES <= n; j += K_LANES)
        for (int l = 0; l < K_LANES; l++) {
            real d = x[j + l] - c;
            acc[l] += d * d;
        }
    for (int l = 0; l < K_LANES && j + l < n; l++) {
        real d = x[j + l] - c;
        acc[l] += d * d;
    }
    return k_lanes_combine(acc);
}

/* Σ_j exp(x[j] − c) */
FSMOE_HD real k_sum_exp_dev(const real *x, real c, long n)
{
    real acc[K_LANES] = {0};
    long j = 0;
    for (; j + K_LANES <= n; j += K_LANES)
        for (int l = 0; l < K_LANES; l++)
            acc[l] += RT_EXP(x[j + l] - c);
    for (int l = 0; l < K_LANES && j + l < n; l++)
        acc[l] += RT_EXP(x[j + l] - c);
    return k_lanes_combine(acc);
}

/* Σ_j a[j]·b[j] */
FSMOE_HD real k_dot(const real *a, const real *b, long n)
{
    real acc[K_LANES] = {0};
    long j = 0;
    for (; j + K_LANES <= n; j += K_LANES)
        for (int l = 0; l < K_LANES; l++)
            acc[l] += a[j + l] * b[j + l];
    for (int l = 0; l < K_LANES && j + l < n; l++)
        acc[l] += a[j + l] * b[j + l];
    return k_lanes_combine(acc);
}

/* max_j x[j]·scale (n ≥ 1). A NaN is passed over unless it is x[0], as in the sequential loop
 * it replaces; every caller then exponentiates each x[j] − max, so the NaN reaches its result
 * either way. */
FSMOE_HD real k_max_scaled(const real *x, real scale, long n)
{
    real acc[K_LANES];
    for (int l = 0; l < K_LANES; l++)
        acc[l] = x[0] * scale;
    long j = 0;
    for (; j + K_LANES <= n; j += K_LANES)
        for (int l = 0; l < K_LANES; l++) {
            real v = x[j + l] * scale;
            acc[l] = v > acc[l] ? v : acc[l];
        }
    for (int l = 0; l < K_LANES && j + l < n; l++) {
        real v = x[j + l] * scale;
        acc[l] = v > acc[l] ? v : acc[l];
    }
    for (int w = K_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++)
            acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
    return acc[0];
}

/* Lane l's partial of each reduction above: its elements j ≡ l (mod K_LANES) in order, from
 * the same start (0, or x[0]·scale for the maximum). Combining the K_LANES partials as
 * k_lanes_combine (or the maximum's halving) does gives the reduction: the CUDA backend runs a
 * row's lanes on K_LANES threads and combines them with shuffles in that order. */
FSMOE_HD real k_lane_sum(const real *x, long n, int l)
{
    real a = 0;
    for (long j = l; j < n; j += K_LANES)
        a += x[j];
    return a;
}
FSMOE_HD real k_lane_sum_sq_dev(const real *x, real c, long n, int l)
{
    real a = 0;
    for (long j = l; j < n; j += K_LANES) {
        real d = x[j] - c;
        a += d * d;
    }
    return a;
}
FSMOE_HD real k_lane_sum_exp_dev(const real *x, real c, long n, int l)
{
    real a = 0;
    for (long j = l; j < n; j += K_LANES)
        a += RT_EXP(x[j] - c);
    return a;
}
FSMOE_HD real k_lane_dot(const real *a, const real *b, long n, int l)
{
    real s = 0;
    for (long j = l; j < n; j += K_LANES)
        s += a[j] * b[j];
    return s;
}
FSMOE_HD real k_lane_max_scaled(const real *x, real scale, long n, int l)
{
    real a = x[0] * scale;
    for (long j = l; j < n; j += K_LANES) {
        real v = x[j] * scale;
        a = v > a ? v : a;
    }
    return a;
}

/* ---- LayerNorm over the last dimension ----
 * The element loops of a row take the elements m0, m0 + step, ... (the host: 0, 1; the CUDA
 * backend: each of a row's K_LANES threads its lane). */
FSMOE_HD void k_layernorm_out(real *out, const real *xr, const real *w, const real *b, real mu,
                              real rs, long M, long m0, long step)
{
    for (long m = m0; m < M; m += step)
        out[m] = (xr[m] - mu) * rs * w[m] + b[m];
}

/* dx += the input gradient, given s1 = mean(dy·w) and s2 = mean(dy·w·x̂). */
FSMOE_HD void k_layernorm_dx(real *dx, const real *dy, const real *xr, const real *w, real mu,
                             real rs, real s1, real s2, long M, long m0, long step)
{
    for (long m = m0; m < M; m += step) {
        real xh = (xr[m] - mu) * rs;
        dx[m] += (dy[m] * w[m] - s1 - xh * s2) * rs;
    }
}

/* Lane l's partials of Σ dy·w (*a1) and Σ dy·w·x̂ (*a2). */
FSMOE_HD void k_layernorm_bwd_lane(real *a1, real *a2, const real *dy, const real *xr,
                                   const real *w, real mu, real rs, long M, int l)
{
    real s1 = 0, s2 = 0;
    for (long j = l; j < M; j += K_LANES) {
        real g = dy[j] * w[j];
        s1 += g;
        s2 += g * (xr[j] - mu) * rs;
    }
    *a1 = s1, *a2 = s2;
}

FSMOE_HD void k_layernorm_row_fwd(long n, real *out, real *mean, real *rstd, const real *x,
                                  const real *w, const real *b, long M)
{
    const real *xr = x + n * M;
    real mu = k_sum(xr, M) / (real)M;
    real var = k_sum_sq_dev(xr, mu, M) / (real)M;
    real rs = (real)1 / RT_SQRT(var + RT_LN_EPS);
    k_layernorm_out(out + n * M, xr, w, b, mu, rs, M, 0, 1);
    mean[n] = mu;
    rstd[n] = rs;
}

/* dx[n,:] += LayerNorm input gradient of row n. */
FSMOE_HD void k_layernorm_row_bwd(long n, real *dx, const real *dout, const real *x,
                                  const real *mean, const real *rstd, const real *w, long M)
{
    const real *dy = dout + n * M, *xr = x + n * M;
    real mu = mean[n], rs = rstd[n];
    real a1[K_LANES] = {0}, a2[K_LANES] = {0};
    long j = 0;
    for (; j + K_LANES <= M; j += K_LANES)
        for (int l = 0; l < K_LANES; l++) {
            real g = dy[j + l] * w[j + l];
            a1[l] += g;
            a2[l] += g * (xr[j + l] - mu) * rs;
        }
    for (int l = 0; l < K_LANES && j + l < M; l++) {
        real g = dy[j + l] * w[j + l];
        a1[l] += g;
        a2[l] += g * (xr[j + l] - mu) * rs;
    }
    real s1 = k_lanes_combine(a1) / (real)M, s2 = k_lanes_combine(a2) / (real)M;
    k_layernorm_dx(dx + n * M, dy, xr, w, mu, rs, s1, s2, M, 0, 1);
}

/* ---- reductions down a column, in a fixed order of chunk sums ----
 * N rows form k_col_chunks(N) chunks (one per 64 rows, at least 1, at most K_COL_CHUNKS);
 * chunk c holds rows [k_chunk_row(c, N), k_chunk_row(c + 1, N)). Each chunk sums its rows in
 * order from 0, and the column's sum adds the chunks' sums in chunk order. The CUDA backend
 * runs one thread per column and chunk (a column summed by one thread walked thousands of rows,
 * and a few hundred columns kept a few SMs busy); the host runs the chunks one after another
 * over a block of columns, whose inner loop vectorises (a chunk of at least 64 rows keeps its
 * extra passes over the block small). Both add in this order, the same on every build and
 * device. */
#define K_COL_CHUNKS 32

FSMOE_HD long k_col_chunks(long N)
{
    long c = N / 64;
    return c < 1 ? 1 : c > K_COL_CHUNKS ? K_COL_CHUNKS : c;
}

FSMOE_HD long k_chunk_row(long c, long N) { return c * N / k_col_chunks(N); }

/* Column m's LayerNorm weight and bias gradient terms summed over rows [n0, n1). */
FSMOE_HD void k_layernorm_col_part(long m, long n0, long n1, real *sw, real *sb, const real *dout,
                                   const real *x, const real *mean, const real *rstd, long M)
{
    real a = 0, b = 0;
    FSMOE_UNROLL_ROWS
    for (long n = n0; n < n1; n++) {
        real dy = dout[n * M + m];
        a += dy * (x[n * M + m] - mean[n]) * rstd[n];
        b += dy;
    }
    *sw = a, *sb = b;
}

/* Column m of the LayerNorm weight and bias gradients (accumulated): the reference order. */
FSMOE_HD void k_layernorm_col_grad(long m, real *dw, real *db, const real *dout, const real *x,
                                   const real *mean, const real *rstd, long N, long M)
{
    real sw = 0, sb = 0;
    for (long c = 0; c < k_col_chunks(N); c++) {
        real pw, pb;
        k_layernorm_col_part(m, k_chunk_row(c, N), k_chunk_row(c + 1, N), &pw, &pb, dout, x,
                             mean, rstd, M);
        sw += pw, sb += pb;
    }
    dw[m] += sw;
    db[m] += sb;
}

/* The same for columns [m0, m1) at once (at most 64), walking each chunk's rows in order so
 * that each row's slice is read contiguously; the same sums to the bit. accw, accb, partw,
 * partb: m1 - m0 scratch each. */
FSMOE_HD void k_layernorm_col_grads(long m0, long m1, real *dw, real *db, real *accw, real *accb,
                                    real *partw, real *partb, const real *dout, const real *x,
                                    const real *mean, const real *rstd, long N, long M)
{
    for (long m = m0; m < m1; m++)
        accw[m - m0] = 0, accb[m - m0] = 0;
    for (long c = 0; c < k_col_chunks(N); c++) {
        for (long m = m0; m < m1; m++)
            partw[m - m0] = 0, partb[m - m0] = 0;
        for (long n = k_chunk_row(c, N); n < k_chunk_row(c + 1, N); n++) {
            const real *dy = dout + n * M, *xr = x + n * M;
            real mu = mean[n], rs = rstd[n];
            for (long m = m0; m < m1; m++) {
                partw[m - m0] += dy[m] * (xr[m] - mu) * rs;
                partb[m - m0] += dy[m];
            }
        }
        for (long m = m0; m < m1; m++)
            accw[m - m0] += partw[m - m0], accb[m - m0] += partb[m - m0];
    }
    for (long m = m0; m < m1; m++)
        dw[m] += accw[m - m0], db[m] += accb[m - m0];
}

/* ---- bias ---- */
FSMOE_HD void k_bias_add(long i, real *out, const real *bias, long M) { out[i] += bias[i % M]; }

/* Row n of the same (the host loops over rows: no division per element). */
FSMOE_HD void k_bias_add_row(long n, real *out, const real *bias, long M)
{
    for (long m = 0; m < M; m++)
        out[n * M + m] += bias[m];
}

/* Column m of dout summed over rows [n0, n1). */
FSMOE_HD real k_bias_col_part(long m, long n0, long n1, const real *dout, long M)
{
    real s = 0;
    FSMOE_UNROLL_ROWS
    for (long n = n0; n < n1; n++)
        s += dout[n * M + m];
    return s;
}

/* Column m of the bias gradient (accumulated), in the chunks' order (above). */
FSMOE_HD void k_bias_grad_col(long m, real *db, const real *dout, long N, long M)
{
    real s = 0;
    for (long c = 0; c < k_col_chunks(N); c++)
        s += k_bias_col_part(m, k_chunk_row(c, N), k_chunk_row(c + 1, N), dout, M);
    db[m] += s;
}

/* Columns [m0, m1) of the same, reading dout row by row (unit stride: the host runs one
 * block of columns per thread and the inner loop vectorises). acc, part: m1 - m0 entries. */
FSMOE_HD void k_bias_grad_cols(long m0, long m1, real *db, real *acc, real *part,
                               const real *dout, long N, long M)
{
    for (long m = m0; m < m1; m++)
        acc[m - m0] = 0;
    for (long c = 0; c < k_col_chunks(N); c++) {
        for (long m = m0; m < m1; m++)
            part[m - m0] = 0;
        for (long n = k_chunk_row(c, N); n < k_chunk_row(c + 1, N); n++)
            for (long m = m0; m < m1; m++)
                part[m - m0] += dout[n * M + m];
        for (long m = m0; m < m1; m++)
            acc[m - m0] += part[m - m0];
    }
    for (long m = m0; m < m1; m++)
        db[m] += acc[m - m0];
}

/* ---- causal softmax of attention scores; row r of a (BH·L, L) matrix, query t = r % L ---- */
/* Element loops of a row (elements j0, j0 + step, ...; see LayerNorm): a = exp(s·scale − mx)
 * over the row's first t + 1 entries; then a /= z there and 0 after. */
FSMOE_HD void k_softmax_exp(real *a, const real *s, real scale, real mx, long t, long j0,
                            long step)
{
    for (long j = j0; j <= t; j += step)
        a[j] = RT_EXP(s[j] * scale - mx);
}
FSMOE_HD void k_softmax_div(real *a, real z, long t, long L, long j0, long step)
{
    for (long j = j0; j < L; j += step)
        a[j] = j <= t ? a[j] / z : (real)0;
}
/* ds = a·(da − dot)·scale over the first t + 1 entries, 0 after. */
FSMOE_HD void k_softmax_grad(real *ds, const real *a, const real *da, real dot, real scale,
                             long t, long L, long j0, long step)
{
    for (long j = j0; j < L; j += step)
        ds[j] = j <= t ? a[j] * (da[j] - dot) * scale : (real)0;
}

FSMOE_HD void k_attn_softmax_row_fwd(long r, real *att, const real *scores, long L, real scale)
{
    long t = r % L;
    const real *s = scores + r * L;
    real *a = att + r * L;
    real mx = k_max_scaled(s, scale, t + 1);
    k_softmax_exp(a, s, scale, mx, t, 0, 1);
    real z = k_sum(a, t + 1);
    k_softmax_div(a, z, t, L, 0, 1);
}

/* dscores (overwritten) from datt; includes the scale. */
FSMOE_HD void k_attn_softmax_row_bwd(long r, real *dscores, const real *datt, const real *att,
                                     long L, real scale)
{
    long t = r % L;
    const real *a = att + r * L, *da = datt + r * L;
    real *ds = dscores + r * L;
    real dot = k_dot(a, da, t + 1);
    k_softmax_grad(ds, a, da, dot, scale, t, L, 0, 1);
}

/* ---- cross-entropy of one row; returns the loss and writes (softmax - onehot)·scale ---- */
/* dz = (exp(z − lse) − [j = y])·scale, elements j0, j0 + step, ... of the row (see LayerNorm). */
FSMOE_HD void k_crossent_grad(real *dz, const real *z, real lse, long y, real scale, long V,
                              long j0, long step)
{
    for (long j = j0; j < V; j += step)
        dz[j] = (RT_EXP(z[j] - lse) - (j == y ? (real)1 : (real)0)) * scale;
}

FSMOE_HD real k_crossent_row(long n, real *dlogits, const real *logits, const int *targets,
                             long V, real scale)
{
    const real *z = logits + n * V;
    real mx = k_max_scaled(z, (real)1, V);
    real lse = mx + RT_LOG(k_sum_exp_dev(z, mx, V));
    int y = targets[n];
    if (dlogits)
        k_crossent_grad(dlogits + n * V, z, lse, y, scale, V, 0, 1);
    return lse - z[y];
}

/* ---- vocabulary-parallel cross-entropy (Megatron-LM's vocab_parallel_cross_entropy) ----
 * Member p of the slice group holds the logits' columns [v0, v0 + Vl) (Vl >= 1); targets are
 * global ids. Each member reduces its slice of row n to three numbers, the members exchange
 * them (an AllGather of 3N reals), and each finishes the row from all of them. Megatron-LM
 * all-reduces the row maxima before the sums (two rounds); merging partial (max, Σ exp) pairs
 * with online softmax's rescaling needs one round. With P = 1 and v0 = 0 the two functions
 * give k_crossent_row's results bit for bit (exp(0) = 1; the sums run in the same order). */

/* stats[3n..3n+2] = (max_j z[j], Σ_j exp(z[j] − max), z[target − v0] or 0 when the target lies
 * outside the slice) for row n of this member's (N, Vl) logits. */
/* Stores row n's three statistics from its maximum and sum (the CUDA backend reduces them over
 * a row's lanes, the host below). */
FSMOE_HD void k_crossent_stats_put(long n, real *stats, const real *z, real mx, real s,
                                   const int *targets, long Vl, long v0)
{
    long y = (long)targets[n] - v0;
    stats[3 * n] = mx;
    stats[3 * n + 1] = s;
    stats[3 * n + 2] = y >= 0 && y < Vl ? z[y] : (real)0;
}

FSMOE_HD void k_crossent_stats_row(long n, real *stats, const real *logits, const int *targets,
                                   long Vl, long v0)
{
    const real *z = logits + n * Vl;
    real mx = k_max_scaled(z, (real)1, Vl);
    k_crossent_stats_put(n, stats, z, mx, k_sum_exp_dev(z, mx, Vl), targets, Vl, v0);
}

/* Row n's loss from every member's statistics, stats (P, N, 3) member-major:
 * m* = max_p m_p, lse = m* + log Σ_p s_p·exp(m_p − m*), loss = lse − Σ_p t_p (exactly one
 * member holds the target). dlogits (the local columns; NULL: none) = (softmax − onehot)·scale. */
/* Row n's log-sum-exp and target logit from every member's statistics (below). */
FSMOE_HD real k_crossent_merge(long n, const real *stats, int P, long N, real *zt_out)
{
    real mx = stats[3 * n];
    for (int p = 1; p < P; p++)
        if (stats[3 * (p * N + n)] > mx)
            mx = stats[3 * (p * N + n)];
    real s = 0, zt = 0;
    for (int p = 0; p < P; p++) {
        const real *st = stats + 3 * (p * N + n);
        s += st[1] * RT_EXP(st[0] - mx);
        zt += st[2];
    }
    *zt_out = zt;
    return mx + RT_LOG(s);
}

FSMOE_HD real k_crossent_finish_row(long n, real *dlogits, const real *logits, const int *targets,
                                    const real *stats, int P, long N, long Vl, long v0,
                                    real scale)
{
    real zt, lse = k_crossent_merge(n, stats, P, N, &zt);
    if (dlogits)
        k_crossent_grad(dlogits + n * Vl, logits + n * Vl, lse, (long)targets[n] - v0, scale,
                        Vl, 0, 1);
    return lse - zt;
}

/* ---- AdamW (decoupled weight decay, bias-corrected), element i ----
 * The gradient enters scaled by gs (gradient clipping's factor, 1 without) and is consumed:
 * g[i] is cleared once read, so the next step accumulates into zeros without a pass over the
 * gradients of its own, and clipping needs no pass either. The step's constants are folded
 * once per call (k_adamw_coefs), as PyTorch's AdamW does: with m̂ = m/bc1 and v̂ = v/bc2,
 * lr·m̂/(√v̂ + ε) = (lr/bc1)·m/(√v·(1/√bc2) + ε), so an element costs one division and one
 * square root instead of three divisions and a square root (the pass is bound by memory, its
 * 4 reads and 4 writes per element, once the divisions are gone). */
typedef struct {
    real gs, b1, b2, eps;
    real step;   /* lr / bc1 */
    real rs2;    /* 1 / sqrt(bc2) */
    real decay;  /* lr · wd */
} k_adamw_coef;

FSMOE_HD k_adamw_coef k_adamw_coefs(real gs, real lr, real b1, real b2, real eps, real wd,
                                    real bc1, real bc2)
{
    k_adamw_coef c;
    c.gs = gs, c.b1 = b1, c.b2 = b2, c.eps = eps;
    c.step = (real)((double)lr / (double)bc1);
    c.rs2 = (real)(1.0 / sqrt((double)bc2));
    c.decay = (real)((double)lr * (double)wd);
    return c;
}

FSMOE_HD void k_adamw(long i, real *p, real *g, real *m, real *v, k_adamw_coef c)
{
    real gi = g[i] * c.gs;
    g[i] = 0;
    real mi = c.b1 * m[i] + ((real)1 - c.b1) * gi;
    real vi = c.b2 * v[i] + ((real)1 - c.b2) * gi * gi;
    m[i] = mi, v[i] = vi;
    real pi = p[i];
    p[i] = pi - (c.step * mi / (RT_SQRT(vi) * c.rs2 + c.eps) + c.decay * pi);
}

/* ---- rows: gather and weighted scatter-add (the Tutel order; row dot products are k_dot) ---- */
FSMOE_HD void k_gather_row(long i, real *dst, const real *src, const int *idx, long M)
{
    int s = idx[i];
    for (long m = 0; m < M; m++)
        dst[i * M + m] = s >= 0 ? src[(long)s * M + m] : (real)0;
}

#endif
