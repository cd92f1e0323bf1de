#include "nn/broadcast.h"

#include <omp.h>
#include <string.h>

/* Below this many output elements a walk runs on one thread: waking the team costs more. */
enum { PAR_MIN = 1 << 14, SPAN_ALIGN = 64, CHUNK = 256 };

int dt_bcast_plan(dt_bcast *p, int rank, const int *a_dims, const int *b_dims, int a_batched,
                  int b_batched) {
    memset(p, 0, sizeof *p);
    if (rank < 0 || rank > DT_VALUE_MAX_RANK) return -1;
    size_t stride_a = 1, stride_b = 1, out_sample = 1;
    size_t d_out[DT_BCAST_MAX_AXES], s_a[DT_BCAST_MAX_AXES], s_b[DT_BCAST_MAX_AXES];
    for (int d = rank - 1; d >= 0; d--) { /* each operand contiguous in its own axes */
        const int x = a_dims[d], y = b_dims[d];
        if (x < 1 || y < 1 || (x != y && x != 1 && y != 1)) return -1;
        d_out[d] = (size_t)(x > y ? x : y);
        s_a[d] = x == 1 ? 0 : stride_a;
        s_b[d] = y == 1 ? 0 : stride_b;
        stride_a *= (size_t)x;
        stride_b *= (size_t)y;
        out_sample *= d_out[d];
    }
    p->a_sample = a_batched ? stride_a : 0;
    p->b_sample = b_batched ? stride_b : 0;
    p->out_sample = out_sample;
    /* axes of extent 1 dropped, neighbours merged where both operands step through them
     * as through one axis */
    for (int d = 0; d < rank; d++) {
        if (d_out[d] == 1) continue;
        const int k = p->rank - 1;
        if (k >= 0 && p->sa[k] == s_a[d] * d_out[d] && p->sb[k] == s_b[d] * d_out[d]) {
            p->dims[k] *= d_out[d];
            p->sa[k] = s_a[d];
            p->sb[k] = s_b[d];
            continue;
        }
        p->dims[p->rank] = d_out[d];
        p->sa[p->rank] = s_a[d];
        p->sb[p->rank] = s_b[d];
        p->rank++;
    }
    return 0;
}

int dt_bcast_full(const dt_bcast *p, int x_is_b) {
    return (x_is_b ? p->b_sample : p->a_sample) == p->out_sample;
}

/* The plan with the batch axis of n samples in front (merged into the first axis where
 * the strides allow), and the output's own strides. */
typedef struct walk {
    int k;
    size_t d[DT_BCAST_MAX_AXES + 1], sa[DT_BCAST_MAX_AXES + 1], sb[DT_BCAST_MAX_AXES + 1];
    size_t so[DT_BCAST_MAX_AXES + 1]; /* the output's: contiguous */
} walk;

static void walk_of(const dt_bcast *p, int n, walk *w) {
    w->k = 0;
    if (n > 1) {
        w->d[0] = (size_t)n;
        w->sa[0] = p->a_sample;
        w->sb[0] = p->b_sample;
        w->k = 1;
    }
    for (int i = 0; i < p->rank; i++) {
        const int k = w->k - 1;
        if (k == 0 && w->sa[0] == p->sa[i] * p->dims[i] && w->sb[0] == p->sb[i] * p->dims[i]) {
            w->d[0] *= p->dims[i];
            w->sa[0] = p->sa[i];
            w->sb[0] = p->sb[i];
            continue;
        }
        w->d[w->k] = p->dims[i];
        w->sa[w->k] = p->sa[i];
        w->sb[w->k] = p->sb[i];
        w->k++;
    }
    if (w->k == 0) { /* one element */
        w->d[0] = 1;
        w->sa[0] = w->sb[0] = 0;
        w->k = 1;
    }
    size_t s = 1;
    for (int i = w->k - 1; i >= 0; i--) {
        w->so[i] = s;
        s *= w->d[i];
    }
}

/* [lo, hi) of [0, total) for this thread: spans of SPAN_ALIGN elements (align 1: items) */
static void my_range(size_t total, size_t align, size_t *lo, size_t *hi) {
    const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
    const size_t per = ((total + nt - 1) / nt + align - 1) / align * align;
    *lo = t * per < total ? t * per : total;
    *hi = *lo + per < total ? *lo + per : total;
}

/* After axis i's index grew to its extent: back to 0 there, one step on the axis
 * before, and so on up. */
static void carry(const walk *w, size_t *idx, size_t *ia, size_t *ib, int i) {
    for (; i > 0 && idx[i] == w->d[i]; i--) {
        *ia -= w->d[i] * w->sa[i];
        *ib -= w->d[i] * w->sb[i];
        idx[i] = 0;
        idx[i - 1]++;
        *ia += w->sa[i - 1];
        *ib += w->sb[i - 1];
    }
}

void dt_bcast_runs(const dt_bcast *p, int n, dt_bcast_run_fn fn, void *ctx) {
    walk w;
    walk_of(p, n, &w);
    const size_t total = (size_t)n * p->out_sample;
    const int k = w.k;
    const size_t len_in = w.d[k - 1];
    const int sa_in = w.sa[k - 1] != 0, sb_in = w.sb[k - 1] != 0;
#pragma omp parallel if (total >= PAR_MIN)
    {
        size_t lo, hi;
        my_range(total, SPAN_ALIGN, &lo, &hi);
        if (lo < hi) {
            size_t idx[DT_BCAST_MAX_AXES + 1], ia = 0, ib = 0, rest = lo;
            for (int i = k - 1; i >= 0; i--) { /* where this range starts: once */
                idx[i] = rest % w.d[i];
                rest /= w.d[i];
                ia += idx[i] * w.sa[i];
                ib += idx[i] * w.sb[i];
            }
            for (size_t pos = lo; pos < hi;) {
                dt_bcast_run r = {pos, ia, ib, 0, sa_in, sb_in, 1, 0, 0};
                if (k > 1 && idx[k - 1] == 0 && hi - pos >= len_in) {
                    /* whole rows along the axis before the innermost: one call */
                    size_t rows = (hi - pos) / len_in;
                    if (rows > w.d[k - 2] - idx[k - 2]) rows = w.d[k - 2] - idx[k - 2];
                    r.len = len_in, r.rows = rows, r.ra = w.sa[k - 2], r.rb = w.sb[k - 2];
                    fn(ctx, &r);
                    pos += rows * len_in;
                    idx[k - 2] += rows;
                    ia += rows * w.sa[k - 2];
                    ib += rows * w.sb[k - 2];
                    carry(&w, idx, &ia, &ib, k - 2);
                    continue;
                }
                const size_t left = len_in - idx[k - 1];
                r.len = left < hi - pos ? left : hi - pos;
                fn(ctx, &r);
                pos += r.len;
                idx[k - 1] += r.len;
                ia += r.len * w.sa[k - 1];
                ib += r.len * w.sb[k - 1];
                carry(&w, idx, &ia, &ib, k - 1);
            }
        }
    }
}

/* An odometer over a subset of the walk's axes, stepping two offsets. */
typedef struct odometer {
    int count, axes[DT_BCAST_MAX_AXES + 1];
    size_t idx[DT_BCAST_MAX_AXES + 1];
    size_t o, io; /* the output's offset, the other operand's */
} odometer;

/* Steps to the next position; 0 when it wrapped round to the first. */
static int odometer_next(odometer *od, const walk *w, const size_t *s_other) {
    for (int j = od->count - 1; j >= 0; j--) {
        const int i = od->axes[j];
        od->idx[j]++;
        od->o += w->so[i];
        od->io += s_other[i];
        if (od->idx[j] < w->d[i]) return 1;
        od->o -= w->d[i] * w->so[i];
        od->io -= w->d[i] * s_other[i];
        od->idx[j] = 0;
    }
    return 0;
}

/* The odometer at position `at` (its axes' flat index). */
static void odometer_set(odometer *od, const walk *w, const size_t *s_other, size_t at) {
    od->o = od->io = 0;
    for (int j = od->count - 1; j >= 0; j--) {
        const int i = od->axes[j];
        od->idx[j] = at % w->d[i];
        at /= w->d[i];
        od->o += od->idx[j] * w->so[i];
        od->io += od->idx[j] * s_other[i];
    }
}

void dt_bcast_reduce(const dt_bcast *p, int n, int x_is_b, dt_bcast_sum_fn sum,
                     dt_bcast_done_fn done, void *ctx) {
    walk w;
    walk_of(p, n, &w);
    const size_t *sx = x_is_b ? w.sb : w.sa, *s_other = x_is_b ? w.sa : w.sb;
    const int k = w.k;
    const size_t total = (size_t)n * p->out_sample, len_in = w.d[k - 1];
    const int so_in = s_other[k - 1] != 0;
    /* kept: X's own axes (X is contiguous over them, in order); spread: those it
     * broadcasts along, whose positions sum into each of its elements */
    odometer kept = {0}, spread = {0};
    size_t numel_x = 1;
    for (int i = 0; i < k; i++) {
        if (sx[i]) {
            kept.axes[kept.count++] = i;
            numel_x *= w.d[i];
        } else {
            spread.axes[spread.count++] = i;
        }
    }
    /* the last spread axis left to the odometer below: rows of one call instead */
    size_t rows_of = 1, ro = 0, rio = 0;
    const int inner_spread = !sx[k - 1];
    if (spread.count > inner_spread) {
        const int ax = spread.axes[spread.count - 1 - inner_spread];
        rows_of = w.d[ax], ro = w.so[ax], rio = s_other[ax];
        if (inner_spread) spread.axes[spread.count - 2] = spread.axes[spread.count - 1];
        spread.count--;
    }
    if (inner_spread) {
        /* the innermost axis broadcasts X (squeeze-and-excitation's scale: each element's
         * sum runs over a whole plane): one sum per element over runs */
        spread.count--; /* the runs cover it */
#pragma omp parallel if (total >= PAR_MIN)
        {
            size_t lo, hi;
            my_range(numel_x, 1, &lo, &hi);
            if (lo < hi) {
                odometer at = kept, over = spread;
                odometer_set(&at, &w, s_other, lo);
                for (size_t e = lo; e < hi; e++) {
                    float acc = 0.0f;
                    odometer_set(&over, &w, s_other, 0);
                    do {
                        const dt_bcast_sum_run r = {
                            at.o + over.o, at.io + over.io, len_in, so_in, 0, rows_of, ro, rio};
                        sum(ctx, &acc, &r);
                    } while (odometer_next(&over, &w, s_other));
                    done(ctx, e, &acc, 1);
                    odometer_next(&at, &w, s_other);
                }
            }
        }
        return;
    }
    /* the innermost axis is X's (a position embedding summed over the batch): chunks of
     * it accumulate a vector per spread position */
    kept.count--; /* the chunks cover it */
    const size_t rows = numel_x / len_in, chunks = (len_in + CHUNK - 1) / CHUNK;
#pragma omp parallel if (total >= PAR_MIN)
    {
        size_t lo, hi;
        my_range(rows * chunks, 1, &lo, &hi);
        float acc[CHUNK];
        odometer at = kept, over = spread;
        for (size_t item = lo; item < hi; item++) {
            const size_t row = item / chunks, j0 = item % chunks * CHUNK;
            const size_t len = len_in - j0 < CHUNK ? len_in - j0 : CHUNK;
            odometer_set(&at, &w, s_other, row);
            memset(acc, 0, sizeof(float) * len);
            odometer_set(&over, &w, s_other, 0);
            do {
                const dt_bcast_sum_run r = {at.o + over.o + j0,
                                            at.io + over.io + j0 * (size_t)so_in,
                                            len,
                                            so_in,
                                            1,
                                            rows_of,
                                            ro,
                                            rio};
                sum(ctx, acc, &r);
            } while (odometer_next(&over, &w, s_other));
            done(ctx, row * len_in + j0, acc, len);
        }
    }
}
