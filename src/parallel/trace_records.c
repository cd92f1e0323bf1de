#include "parallel/trace_records.h"

#include <stdlib.h>
#include <string.h>

#include "core/timer.h"

enum {
    TRACE_TAG_PING = 7411,
    TRACE_TAG_PONG = 7412,
    TRACE_TAG_HEAD = 7413,
    TRACE_TAG_SPANS = 7414
};

/* Round trips per rank and measurement: the fastest is kept (a slow one met a
 * descheduled peer). */
enum { CLOCK_ROUNDS = 16 };

void dt_trace_clock_measure(const dt_world *w, dt_trace_clock *c, int which) {
    const double now = dt_now();
    c->at[which] = now;
    c->offset[which] = c->error[which] = 0.0;
    for (int r = 1; r < w->size; r++) {
        if (w->rank != 0 && w->rank != r) continue;
        double best_rtt = -1.0, best_offset = 0.0;
        for (int i = 0; i < CLOCK_ROUNDS; i++) {
            if (w->rank == 0) {
                const double sent = dt_now();
                double theirs = 0.0;
                dt_world_send_bytes(w, &sent, sizeof sent, r, TRACE_TAG_PING, "the trace's clocks");
                dt_world_recv_bytes(w, &theirs, sizeof theirs, r, TRACE_TAG_PONG,
                                    "the trace's clocks");
                const double back = dt_now(), rtt = back - sent;
                if (best_rtt < 0 || rtt < best_rtt)
                    best_rtt = rtt, best_offset = theirs - (sent + back) / 2;
            } else {
                double ping = 0.0;
                dt_world_recv_bytes(w, &ping, sizeof ping, 0, TRACE_TAG_PING, "the trace's clocks");
                const double mine = dt_now();
                dt_world_send_bytes(w, &mine, sizeof mine, 0, TRACE_TAG_PONG, "the trace's clocks");
            }
        }
        /* rank 0 tells r what it measured */
        double result[2] = {best_offset, best_rtt / 2};
        if (w->rank == 0)
            dt_world_send_bytes(w, result, sizeof result, r, TRACE_TAG_PING, "the trace's clocks");
        else
            dt_world_recv_bytes(w, result, sizeof result, 0, TRACE_TAG_PING, "the trace's clocks");
        if (w->rank == r) c->offset[which] = result[0], c->error[which] = result[1];
    }
    if (w->rank != 0) c->at[which] = now;
}

/* What a rank sends before its spans. */
typedef struct head {
    int job_rank;
    dt_trace_clock clock;
    long long n[DT_TRACK_COUNT];
} head;

void dt_trace_ranks_free(dt_trace_rank *r, int n) {
    for (int i = 0; r && i < n; i++)
        for (int k = 0; k < DT_TRACK_COUNT; k++) free(r[i].track[k].span);
    free(r);
}

void dt_trace_gather(const dt_world *w, const dt_trace *t, int job_rank, dt_trace_rank **out) {
    *out = NULL;
    head mine;
    memset(&mine, 0, sizeof mine);
    mine.clock = t->clock;
    mine.job_rank = job_rank;
    for (int k = 0; k < DT_TRACK_COUNT; k++) mine.n[k] = (long long)t->track[k].n;
    if (w->rank != 0) {
        dt_world_send_bytes(w, &mine, sizeof mine, 0, TRACE_TAG_HEAD, "the trace's spans");
        for (int k = 0; k < DT_TRACK_COUNT; k++)
            if (t->track[k].n)
                dt_world_send_bytes(w, t->track[k].span, sizeof(dt_trace_span) * t->track[k].n, 0,
                                    TRACE_TAG_SPANS, "the trace's spans");
        return;
    }
    /* out of memory here ends the job: the other ranks' messages cannot be left half
     * taken */
    dt_trace_rank *all = calloc((size_t)w->size, sizeof *all);
    if (!all) dt_world_abort(w, "out of memory for the trace's ranks");
    for (int r = 0; r < w->size; r++) {
        head h = mine;
        if (r) dt_world_recv_bytes(w, &h, sizeof h, r, TRACE_TAG_HEAD, "the trace's spans");
        all[r].rank = r;
        all[r].job_rank = h.job_rank;
        all[r].clock = h.clock;
        for (int k = 0; k < DT_TRACK_COUNT; k++) {
            const size_t n = h.n[k] > 0 ? (size_t)h.n[k] : 0;
            dt_trace_span *s = malloc(sizeof(dt_trace_span) * (n ? n : 1));
            if (!s) dt_world_abort(w, "out of memory for rank %d's trace (%zu spans)", r, n);
            if (r == 0)
                memcpy(s, t->track[k].span, sizeof(dt_trace_span) * n);
            else if (n)
                dt_world_recv_bytes(w, s, sizeof(dt_trace_span) * n, r, TRACE_TAG_SPANS,
                                    "the trace's spans");
            all[r].track[k] = (dt_trace_spans){.span = s, .n = n, .cap = n};
        }
    }
    *out = all;
}
