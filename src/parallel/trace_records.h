/* The trace's messaging (metrics/trace.h): each rank's clock measured against rank 0
 * of the workers' world, and every rank's spans gathered to rank 0, which writes the
 * file. Messaging, so it sits with the world it sends over, as sys_records does. */
#ifndef DTRAIN_TRACE_RECORDS_H
#define DTRAIN_TRACE_RECORDS_H

#include "dtrain/error.h"
#include "dtrain/world.h"
#include "metrics/trace.h"

/* Collective over w: rank r's clock offset against rank 0's, as measurement `which`
 * (0 at the start, 1 at the end) into c: the offset of the fastest of a few round
 * trips (Cristian), its error half that round trip. Rank 0's is 0. */
void dt_trace_clock_measure(const dt_world *w, dt_trace_clock *c, int which);

/* Collective over w: every rank's spans, clock and rank in the job to rank 0 (the
 * caller names the hosts: the trainer has every worker's from setup). On rank 0
 * *out gets w->size ranks in rank order (free with dt_trace_ranks_free), NULL
 * elsewhere. Out of memory ends the job (dt_world_abort). */
void dt_trace_gather(const dt_world *w, const dt_trace *t, int job_rank, dt_trace_rank **out);
void dt_trace_ranks_free(dt_trace_rank *r, int n);

#endif
