/* Whether the gradient all-reduce overlaps backward (ddp.h), chosen per job.
 *
 * Overlap hides communication behind backward by running it on a second thread. That
 * pays when the thread has a core of its own or mostly waits on a network; when the
 * ranks' compute threads already take every core it competes with them, and the step
 * gets slower (measured on 2 cores, 2 ranks x 1 thread, resnet18 batch 32: weak-scaling
 * efficiency 0.94 with overlap against 0.98 without; docs/distributed.md). */
#ifndef DTRAIN_OVERLAP_H
#define DTRAIN_OVERLAP_H

#include <stddef.h>

typedef enum dt_overlap_mode {
    DT_OVERLAP_AUTO, /* the rule below (default) */
    DT_OVERLAP_ON,
    DT_OVERLAP_OFF,
} dt_overlap_mode;

const char *dt_overlap_mode_name(dt_overlap_mode mode);
/* "auto", "on" or "off"; -1 for anything else. */
int dt_overlap_mode_parse(const char *name, dt_overlap_mode *mode);

/* The auto rule for one rank: the host's cores, the cores this process may run on (its
 * CPU affinity: mpirun binds each of 1-2 ranks to one core by default), ranks of the
 * job on this host, compute threads per rank, and whether the job's ranks span hosts.
 * Overlap is on when the rank's communication thread gets a core of its own (threads
 * + 1 <= own cores and local_ranks x (threads + 1) <= host cores) or the ranks span
 * hosts (the thread mostly waits on the network); off otherwise. Writes the reason,
 * one line, into why. */
int dt_overlap_auto(int host_cores, int own_cores, int local_ranks, int threads, int spans_hosts,
                    char *why, size_t why_size);

/* The host's online cores, and the cores this process may run on (its affinity). */
int dt_overlap_host_cores(void);
int dt_overlap_own_cores(void);

#endif
