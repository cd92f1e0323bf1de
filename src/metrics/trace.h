/* A rank's timeline of a training run (`train --trace FILE`): spans on a few tracks,
 * kept in memory on the rank's own clock (dt_now), gathered to the first worker at
 * the end (parallel/trace_records) and written there in the Chrome trace event format
 * that Perfetto and chrome://tracing open (dt_trace_write).
 *
 * Tracks: "steps" (a step from its data wait to its update; evaluations and
 * checkpoints between steps), "compute" (data wait, forward, backward, the exchange's
 * wait, the optimizer: one after another), "comm" (each bucket's all-reduce from the
 * moment it was ready to done, or a parameter-server worker's pull and push). Spans of
 * one track never overlap: Perfetto drops a complete event that overlaps another on
 * its track without nesting inside it, so nesting is kept to separate tracks.
 *
 * Bounded: only steps first..last are traced, and a step is traced only while the
 * events so far leave room for one more step under the cap; the file says the window,
 * the cap and how many steps were left out. Recording is a few stores per span and
 * nothing at all without --trace (the trainer holds no trace then). */
#ifndef DTRAIN_TRACE_H
#define DTRAIN_TRACE_H

#include <stddef.h>

#include "dtrain/error.h"

typedef enum dt_trace_track {
    DT_TRACK_STEPS,
    DT_TRACK_COMPUTE,
    DT_TRACK_COMM,
    DT_TRACK_COUNT
} dt_trace_track;

typedef enum dt_trace_name {
    DT_SPAN_STEP,
    DT_SPAN_DATA,
    DT_SPAN_FORWARD,
    DT_SPAN_BACKWARD,
    DT_SPAN_EXCHANGE, /* after backward: waiting for the gradients' exchange */
    DT_SPAN_OPTIMIZER,
    DT_SPAN_BUCKET, /* one bucket's all-reduce; index: the bucket */
    DT_SPAN_PULL,
    DT_SPAN_PUSH,
    DT_SPAN_EVAL,
    DT_SPAN_CHECKPOINT,
    DT_SPAN_COUNT
} dt_trace_name;

/* One span: [t0, t1] on the rank's clock; step -1 for spans between steps. */
typedef struct dt_trace_span {
    double t0, t1;
    long step;
    long long bytes; /* what it sent (a bucket, a push), else 0 */
    int name;        /* dt_trace_name */
    int index;       /* a bucket's number, else 0 */
    double ready;    /* a bucket: when backward had written all of it (0: none) */
} dt_trace_span;

typedef struct dt_trace_spans {
    dt_trace_span *span;
    size_t n, cap;
} dt_trace_spans;

/* A rank's clock against the first worker's, measured at the start and at the end:
 * first worker's time = own time - offset, the offset moving linearly between the two
 * (drift); error: half the fastest round trip of the measurement, a bound on how far
 * the offset can be off. */
typedef struct dt_trace_clock {
    double at[2], offset[2], error[2]; /* own time of each measurement, offset, error */
} dt_trace_clock;

typedef struct dt_trace {
    long first, last; /* steps traced (inclusive; last < 0: to the end) */
    size_t cap;       /* events over all tracks */
    size_t step_need; /* the most events a traced step took (room kept for one more) */
    int recording;    /* the current step is traced */
    long step;        /* the current step's number (the comm thread's spans) */
    long steps_traced, steps_left_out;
    size_t step_start; /* events when the current step began */
    dt_trace_spans track[DT_TRACK_COUNT];
    dt_trace_clock clock;
} dt_trace;

/* Default cap: 200,000 events, about 30 MB of JSON. */
enum { DT_TRACE_DEFAULT_EVENTS = 200000 };

int dt_trace_init(dt_trace *t, long first, long last, size_t cap, dt_error *err);
void dt_trace_free(dt_trace *t);
/* Whether step `step` is traced (in the window, room left); sets t->recording. */
int dt_trace_step_begin(dt_trace *t, long step);
void dt_trace_step_end(dt_trace *t);
/* Records a span of the current step (dropped when the step is not traced) or, with
 * step -1, one between steps (dropped once the cap is reached). t may be NULL. */
void dt_trace_add(dt_trace *t, dt_trace_track track, dt_trace_name name, double t0, double t1,
                  long step, int index, long long bytes);
/* A bucket's all-reduce of the current step: started at t0 (ready since `ready`), done
 * at t1. */
void dt_trace_bucket(dt_trace *t, int bucket, double ready, double t0, double t1, long long bytes);
size_t dt_trace_events(const dt_trace *t);

/* A rank's part of the file. */
typedef struct dt_trace_rank {
    int rank;      /* among the workers */
    int job_rank;  /* in the job (parameter servers come first) */
    char host[96]; /* the host it ran on, as its name is shown */
    dt_trace_clock clock;
    dt_trace_spans track[DT_TRACK_COUNT];
} dt_trace_rank;

typedef struct dt_trace_meta {
    const char *version; /* dtrain's */
    long first, last;
    size_t cap;
    long steps_traced, steps_left_out; /* the first worker's */
    double t_origin;                   /* first worker's time shown as 0 */
} dt_trace_meta;

/* Writes the ranks' spans as one Chrome trace (JSON object format: traceEvents,
 * displayTimeUnit, otherData) to path, atomically: a process per rank, a thread per
 * track, complete events ("X") in microseconds on the first worker's clock, and a
 * counter of bytes sent per step. */
int dt_trace_write(const char *path, const dt_trace_rank *ranks, int n, const dt_trace_meta *meta,
                   dt_error *err);

#endif
