#include "metrics/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/outfile.h"
#include "metrics/runlog.h"

static const char *const span_names[DT_SPAN_COUNT] = {
    "step",   "data", "forward", "backward",   "exchange",  "optimizer",
    "bucket", "pull", "push",    "evaluation", "checkpoint"};
static const char *const track_names[DT_TRACK_COUNT] = {"steps", "compute", "comm"};

/* Room for a step's events before any step was seen: a step, its five phases and
 * a few dozen buckets. */
enum { FIRST_STEP_NEED = 64 };

int dt_trace_init(dt_trace *t, long first, long last, size_t cap, dt_error *err) {
    memset(t, 0, sizeof *t);
    t->first = first;
    t->last = last;
    t->cap = cap;
    t->step_need = FIRST_STEP_NEED;
    for (int k = 0; k < DT_TRACK_COUNT; k++) {
        /* every track may hold the whole cap: the split between them is the run's */
        t->track[k].span = malloc(sizeof(dt_trace_span) * (cap ? cap : 1));
        t->track[k].cap = cap;
        if (!t->track[k].span) {
            dt_trace_free(t);
            return dt_error_set(err, "out of memory for a trace of %zu events", cap);
        }
    }
    return 0;
}

void dt_trace_free(dt_trace *t) {
    for (int k = 0; k < DT_TRACK_COUNT; k++) free(t->track[k].span);
    memset(t, 0, sizeof *t);
}

size_t dt_trace_events(const dt_trace *t) {
    size_t n = 0;
    for (int k = 0; k < DT_TRACK_COUNT; k++) n += t->track[k].n;
    return n;
}

int dt_trace_step_begin(dt_trace *t, long step) {
    const int in_window = step >= t->first && (t->last < 0 || step <= t->last);
    t->recording = 0;
    t->step = step;
    if (!in_window) return 0;
    t->step_start = dt_trace_events(t);
    if (t->step_start + t->step_need > t->cap) {
        t->steps_left_out++;
        return 0;
    }
    t->recording = 1;
    return 1;
}

void dt_trace_step_end(dt_trace *t) {
    if (!t->recording) return;
    const size_t used = dt_trace_events(t) - t->step_start;
    if (used > t->step_need) t->step_need = used;
    t->steps_traced++;
    t->recording = 0;
}

void dt_trace_add(dt_trace *t, dt_trace_track track, dt_trace_name name, double t0, double t1,
                  long step, int index, long long bytes) {
    if (!t || (step >= 0 && !t->recording)) return;
    if (step < 0 && dt_trace_events(t) >= t->cap) return;
    dt_trace_spans *s = &t->track[track];
    if (s->n >= s->cap) return; /* never past the buffer, whatever the caller does */
    s->span[s->n++] = (dt_trace_span){
        .t0 = t0, .t1 = t1, .step = step, .bytes = bytes, .name = name, .index = index};
}

void dt_trace_bucket(dt_trace *t, int bucket, double ready, double t0, double t1, long long bytes) {
    if (!t || !t->recording) return;
    dt_trace_spans *s = &t->track[DT_TRACK_COMM];
    if (s->n >= s->cap) return;
    s->span[s->n++] = (dt_trace_span){.t0 = t0,
                                      .t1 = t1,
                                      .step = t->step,
                                      .bytes = bytes,
                                      .name = DT_SPAN_BUCKET,
                                      .index = bucket,
                                      .ready = ready};
}

/* The first worker's time of a rank's own time t (trace.h's dt_trace_clock). */
static double aligned(const dt_trace_clock *c, double t) {
    const double span = c->at[1] - c->at[0];
    const double drift = span > 0 ? (c->offset[1] - c->offset[0]) / span : 0.0;
    return t - (c->offset[0] + drift * (t - c->at[0]));
}

static int write_meta(FILE *f, const dt_trace_rank *r, int *first) {
    char name[160];
    if (r->job_rank != r->rank)
        snprintf(name, sizeof name, "worker %d: rank %d (%s)", r->rank, r->job_rank, r->host);
    else
        snprintf(name, sizeof name, "rank %d (%s)", r->rank, r->host);
    int rc =
        fprintf(f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":",
                *first ? "" : ",", r->rank) < 0 ||
        dt_json_write_string(f, name) || fputs("}}", f) < 0;
    *first = 0;
    rc = rc || fprintf(f,
                       ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
                       "\"args\":{\"sort_index\":%d}}",
                       r->rank, r->rank) < 0;
    for (int k = 0; k < DT_TRACK_COUNT && !rc; k++)
        rc = fprintf(f,
                     ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                     "\"args\":{\"name\":\"%s\"}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\","
                     "\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                     r->rank, k + 1, track_names[k], r->rank, k + 1, k) < 0;
    return rc ? -1 : 0;
}

/* Nanoseconds since the origin on the first worker's clock: ends and starts are
 * rounded alike, so spans that touch stay touching and never overlap in the file. */
static long long ns_of(const dt_trace_rank *r, double t, double origin) {
    return llround((aligned(&r->clock, t) - origin) * 1e9);
}

static int write_span(FILE *f, const dt_trace_rank *r, int track, const dt_trace_span *s,
                      double origin) {
    const long long a = ns_of(r, s->t0, origin), b = ns_of(r, s->t1, origin);
    const long long dur = b > a ? b - a : 0;
    char name[32];
    if (s->name == DT_SPAN_BUCKET)
        snprintf(name, sizeof name, "bucket %d", s->index);
    else
        snprintf(name, sizeof name, "%s", span_names[s->name]);
    int rc = fprintf(f,
                     ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                     "\"ts\":%lld.%03lld,\"dur\":%lld.%03lld,\"args\":{\"step\":%ld",
                     name, track_names[track], r->rank, track + 1, a / 1000, a % 1000, dur / 1000,
                     dur % 1000, s->step) < 0;
    if (s->bytes) rc = rc || fprintf(f, ",\"bytes\":%lld", s->bytes) < 0;
    if (s->ready > 0 && s->ready <= s->t0) /* how long the bucket waited for the thread */
        rc = rc || fprintf(f, ",\"queued_us\":%.3f", (s->t0 - s->ready) * 1e6) < 0;
    rc = rc || fputs("}}", f) < 0;
    /* bytes sent per step: a counter track beside the rank's threads */
    if (s->name == DT_SPAN_STEP && !rc)
        rc = fprintf(f,
                     ",\n{\"name\":\"bytes sent\",\"ph\":\"C\",\"pid\":%d,\"ts\":%lld.%03lld,"
                     "\"args\":{\"bytes\":%lld}}",
                     r->rank, a / 1000, a % 1000, s->bytes) < 0;
    return rc ? -1 : 0;
}

static int write_other(FILE *f, const dt_trace_rank *ranks, int n, const dt_trace_meta *m) {
    size_t events = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < DT_TRACK_COUNT; k++) events += ranks[i].track[k].n;
    int rc = fputs("\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"dtrain\":", f) < 0 ||
             dt_json_write_string(f, m->version ? m->version : "");
    rc = rc || fprintf(f,
                       ",\"steps_first\":%ld,\"steps_last\":%ld,\"event_cap_per_rank\":%zu,"
                       "\"events\":%zu,\"steps_traced\":%ld,\"steps_left_out\":%ld,"
                       "\"time\":\"microseconds on the first worker's clock\",\"clocks\":[",
                       m->first, m->last, m->cap, events, m->steps_traced, m->steps_left_out) < 0;
    for (int i = 0; i < n && !rc; i++) {
        const dt_trace_clock *c = &ranks[i].clock;
        const double err = c->error[0] > c->error[1] ? c->error[0] : c->error[1];
        rc = fprintf(f,
                     "%s{\"rank\":%d,\"offset_start_us\":%.3f,\"offset_end_us\":%.3f,"
                     "\"error_us\":%.3f}",
                     i ? "," : "", ranks[i].rank, c->offset[0] * 1e6, c->offset[1] * 1e6,
                     err * 1e6) < 0;
    }
    return rc || fputs("]}\n}\n", f) < 0 ? -1 : 0;
}

int dt_trace_write(const char *path, const dt_trace_rank *ranks, int n, const dt_trace_meta *meta,
                   dt_error *err) {
    dt_outfile o;
    if (dt_outfile_check(path, err) || dt_outfile_open(&o, path, err)) return -1;
    /* time 0: the first worker's start, or the earliest span when another rank's
     * came before it (ts must not be negative) */
    double origin = meta->t_origin;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < DT_TRACK_COUNT; k++)
            for (size_t e = 0; e < ranks[i].track[k].n; e++) {
                const double t = aligned(&ranks[i].clock, ranks[i].track[k].span[e].t0);
                if (t < origin) origin = t;
            }
    int rc = fputs("{\"traceEvents\":[", o.f) < 0, first = 1;
    for (int i = 0; i < n && !rc; i++) rc = write_meta(o.f, &ranks[i], &first);
    for (int i = 0; i < n && !rc; i++)
        for (int k = 0; k < DT_TRACK_COUNT && !rc; k++)
            for (size_t e = 0; e < ranks[i].track[k].n && !rc; e++)
                rc = write_span(o.f, &ranks[i], k, &ranks[i].track[k].span[e], origin);
    rc = rc || write_other(o.f, ranks, n, meta);
    if (rc) {
        dt_outfile_discard(&o);
        return dt_error_set(err, "cannot write the trace %s", path);
    }
    return dt_outfile_commit(&o, err);
}
