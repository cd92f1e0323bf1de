/* The run log's `sys` records (sysmon.h's samples) sent between ranks: a worker's to
 * rank 0 at an epoch's end, a parameter server's to the first worker after its
 * statistics. Messaging, so it sits with the world it sends over; the sampler itself
 * never calls MPI. */
#ifndef DTRAIN_SYS_RECORDS_H
#define DTRAIN_SYS_RECORDS_H

#include "dtrain/error.h"
#include "dtrain/world.h"
#include "metrics/runlog.h"

/* Records between ranks of w (a count, then the records; both ranks run the same
 * binary): send blocks until received; recv returns malloc'd records (*n may be 0). */
void dt_sys_records_send(const dt_world *w, int to, const dt_sys_record *r, long n);
int dt_sys_records_recv(const dt_world *w, int from, dt_sys_record **r, long *n, dt_error *err);

#endif
