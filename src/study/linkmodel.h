/* Measured communication beside the ring model of a shaped link, per bucket size: for
 * an all-reduce of n bytes over P hosts each with a link of B bit/s and one-way delay
 * d, split into k buckets, one step costs
 *     T = k * alpha + 2(P-1)/P * n / B,   alpha = 2(P-1) * d
 * (a ring's 2(P-1) steps each wait one link delay; packet headers not counted). The
 * table holds, per (bucket size, process count, batch size), the measured epoch, its
 * compute and all-reduce time beside iterations * T. */
#ifndef DTRAIN_LINKMODEL_H
#define DTRAIN_LINKMODEL_H

#include <stdio.h>

#include "dtrain/error.h"
#include "study/netns.h"

/* The ring model's time of one step's all-reduce (seconds). */
double dt_link_ring_seconds(const dt_link *link, int procs, double bytes, int buckets);

/* Gradient buckets of a model of params floats at bucket_mb MiB (as the trainer cuts
 * them: ddp.h). */
int dt_link_buckets(double params, double bucket_mb);

/* Reads the studies in dirs (each swept at bucket_mb[i] MiB), writes
 * out_dir/network.md and out_dir/network.csv, and prints the markdown to print (if
 * not NULL). Ranks fill hosts ranks_per_host at a time (mpirun's slots, in rank order),
 * so a ring crosses each used host's link once per direction whatever ranks_per_host
 * is, and a config that fits on one host crosses no link (model 0). */
int dt_link_report(const char *const *dirs, const double *bucket_mb, int n, const dt_link *link,
                   int ranks_per_host, const char *where, const char *out_dir, FILE *print,
                   dt_error *err);

#endif
