/* The scaling report's "Reading" (section 6): what its own numbers say, config by
 * config, and nothing they do not. For each multi-process config the training time
 * T(N) is set against the ideal T(1)/N and the difference split with the figures of
 * section 3 (means over ranks):
 *   compute        measured compute per process - T(1)/N   (compute slowdown)
 *   communication  measured exposed communication           (the steps waited for it)
 *   other          T(N) - compute - exposed communication   (step overheads, the wait
 *                  for the slowest rank: T is the slowest rank's time)
 * so the three sum to T(N) - T(1)/N. Loader waits lie outside T and are given beside
 * it. A config measured on a busy machine (or its 1-process run) gets only "re-run". */
#ifndef DTRAIN_READING_H
#define DTRAIN_READING_H

#include <stdio.h>

#include "study/scaling.h"

typedef enum { DT_LOSS_COMPUTE, DT_LOSS_COMM, DT_LOSS_OTHER, DT_LOSS_TERMS } dt_loss_term;

typedef struct dt_reading_split {
    double t1, tn, ideal; /* T(1), T(N), T(1)/N: seconds per epoch */
    double lost;          /* T(N) - T(1)/N */
    double compute;       /* measured compute per process at N; -1 = not measured */
    double comm;          /* measured exposed communication at N; -1 = not measured */
    /* the loss split (seconds, summing to lost); measured = 0: no split in the data */
    double term[DT_LOSS_TERMS];
    int measured;
    int largest;      /* the largest positive term, -1 if none (or not measured) */
    double data_wait; /* loader waits per process at N (outside T); -1 = not measured */
} dt_reading_split;

/* The split of r (N >= 2) against its 1-process row; -1 when there is none or a time
 * is unknown. */
int dt_reading_split_of(const dt_scale_study *s, const dt_scale_row *r, dt_reading_split *out);

/* "compute", "exposed communication", "other". */
const char *dt_loss_term_name(dt_loss_term t);

/* Writes section 6 of the report. */
void dt_reading_write(const dt_scale_study *s, FILE *out);

#endif
