/* The straggler of a synchronous epoch: the rank whose own work (its data wait and
 * compute, everything but waiting for the exchange) took longest, when the others'
 * wait for it is more than a share of the step. In a synchronous step every rank
 * waits for the slowest: what it costs the others is its own time less theirs. */
#ifndef DTRAIN_STRAGGLER_H
#define DTRAIN_STRAGGLER_H

/* A rank is named when the others wait for it more than this share of a step. Two
 * lenet5 ranks with none slowed, each bound to one of this 2-vCPU machine's cores,
 * measured one 10-47% slower than the other over whole runs (its forward and backward,
 * the medians of every step: docs/trace.md), the others waiting up to a third of a
 * step: the bound sits above that. */
#define DT_STRAGGLER_SHARE 0.50

typedef struct dt_straggler {
    int rank;      /* -1: none */
    double slower; /* its own time a step / the others' median - 1 */
    double wait_s; /* a step: its own time less the others' median */
    double share;  /* wait_s / the step */
} dt_straggler;

/* own_s[n]: each rank's own time a step (n >= 2), step_s: the step. Fills s (the
 * slowest rank and its figures, rank -1 when its cost is at most `share` of the step)
 * and returns whether a straggler was found (0 also when out of memory). */
int dt_straggler_find(const double *own_s, int n, double step_s, double share, dt_straggler *s);

#endif
