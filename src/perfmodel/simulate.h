/* The data-parallel step simulator (dtrain simulate): from a model's measured per-op
 * times (profile.h) and a network, the step time of N workers, by a discrete-event
 * schedule of one worker's step rather than a closed formula:
 *   forward (measured, x batch / profile batch / compute_speedup), then backward op by
 *   op in reverse; when an op's backward ends, the gradient range it wrote counts
 *   towards DDP's buckets (ddp.h's bucket plan, the same code the trainer uses); a
 *   bucket whose last float is written is queued on the one communication channel,
 *   which all-reduces buckets one at a time, in order. The step ends when backward
 *   and the last all-reduce are done, plus the update. Without overlap every bucket
 *   waits for the end of backward. All workers are alike, so one worker's schedule is
 *   everyone's (no stragglers, no contention of compute and communication for cores).
 * Collective costs per bucket of n bytes on P workers (alpha latency, beta bytes/s):
 *   ring         2(P-1) alpha + 2(P-1)/P n / beta
 *   tree:K       K workers per node: ring reduce-scatter inside the node, a ring
 *                all-reduce of n over the nodes' links, all-gather inside the node
 *   ps:S         parameter servers, each holding n/S: a push and a pull each cost
 *                alpha + max(n / beta at the worker, W n / (S beta) at a server)
 * Parameter-server modes send the whole gradient after backward (as dtrain's ps
 * worker does): ps-sync step = compute + push + server update + pull; ps-async step =
 * the larger of a worker's own cycle and the servers' time per round of W pushes
 * and pulls (the servers' links are the bottleneck, workers do not wait for each
 * other). */
#ifndef DTRAIN_SIMULATE_H
#define DTRAIN_SIMULATE_H

#include <stddef.h>
#include <stdio.h>

#include "dtrain/error.h"
#include "perfmodel/profile.h"

typedef struct dt_sim_link {
    double latency_s;   /* alpha, per message */
    double bytes_per_s; /* beta */
    double burst_bytes; /* a token bucket's depth: after the link idled, this many bytes
                           cross at once (tbf on emulated hosts); 0 on a real link */
} dt_sim_link;

typedef enum dt_sim_topology { DT_SIM_RING, DT_SIM_TREE, DT_SIM_PS } dt_sim_topology;

typedef enum dt_sim_mode {
    DT_SIM_ALLREDUCE,            /* buckets overlapped with backward (DDP, Horovod) */
    DT_SIM_ALLREDUCE_NO_OVERLAP, /* every bucket after backward */
    DT_SIM_PS_SYNC,
    DT_SIM_PS_ASYNC,
} dt_sim_mode;

typedef struct dt_sim_config {
    dt_sim_mode mode;
    dt_sim_topology topology;
    int per_node;            /* tree:K */
    int servers;             /* ps:S */
    dt_sim_link link, intra; /* between nodes (and worker-server); inside a node (tree) */
    int batch;               /* per worker */
    double compute_speedup;  /* the device's throughput / the profile's (1 = this machine) */
    double bucket_mb;        /* MiB, as --bucket-mb */
    double bytes_per_param;  /* 4 for fp32 gradients, 2 for 16-bit ones */
} dt_sim_config;

/* Defaults: all-reduce with overlap, ring, 25 MiB buckets, fp32, speed-up 1. */
dt_sim_config dt_sim_config_default(void);

typedef struct dt_sim_result {
    int workers, buckets;
    double step_s;    /* one step */
    double compute_s; /* forward + backward + update (+ the profile's other time) */
    double exposed_s; /* step - compute: waiting for communication */
    double comm_s;    /* communication of the step, hidden or not */
    double images_per_s;
} dt_sim_result;

/* Parsers with one-line errors naming the text: "10gbit,50us" (rates in bit|kbit|
 * mbit|gbit per second, decimal, or B/s|KB/s|MB/s|GB/s; latency in s|ms|us|ns,
 * default 0), "ring" | "tree:K" | "ps:S", the mode's name. */
int dt_sim_parse_link(const char *text, dt_sim_link *link, dt_error *err);
int dt_sim_parse_topology(const char *text, dt_sim_config *c, dt_error *err);
int dt_sim_parse_mode(const char *text, dt_sim_mode *mode, dt_error *err);
const char *dt_sim_mode_name(dt_sim_mode mode);

/* Time of one all-reduce of `bytes` over `workers` on c's topology (0 for 1 worker). */
double dt_sim_allreduce_s(const dt_sim_config *c, int workers, double bytes);

/* The step of `workers` workers (>= 1). Checks the config (positive rates, batch,
 * speed-up, a topology that fits the mode); -1 with err otherwise. */
int dt_simulate(const dt_profile *p, const dt_sim_config *c, int workers, dt_sim_result *r,
                dt_error *err);

/* What if (Daydream, dPRO): the compute speed-up that makes one worker's step at c's
 * batch, as the simulator gives it from p (c's own speed-up ignored), take step_s;
 * *here_s (may be NULL) gets that step unscaled. -1 with err for a config the simulator
 * refuses. simulate --step-time, report --times --profile and scale's drift use it. */
int dt_sim_speedup_to_step(const dt_profile *p, const dt_sim_config *c, double step_s,
                           double *speedup, double *here_s, dt_error *err);

/* dtrain simulate's sweep: res[i], the simulation on workers[i] workers. */
int dt_sim_sweep(const dt_profile *p, const dt_sim_config *c, const int *workers, int n,
                 dt_sim_result *res, dt_error *err);
/* Speed-up of res[i] against res[0] at the same batch per worker: N t(N0) / (N0 t(N)). */
double dt_sim_speedup(const dt_sim_result *res, int i);
/* The sweep's table as text: what was simulated, then a line per worker count (step,
 * compute, exposed and communication ms, speed-up, efficiency, images/s); cut at cap. */
void dt_sim_table(const dt_profile *p, const dt_sim_config *c, const dt_sim_result *res, int n,
                  char *table, size_t cap);

/* simulate --validate: every row of a CSV of measured configs (columns name, profile
 * (beside the CSV), workers, batch_size, topology, link, mode, step_ms; optional
 * latency, compute_speedup, bucket_mb, intra_link, compute_ms, exposed_ms) predicted
 * and set against its step_ms: a Markdown table to out, a line per row, and v: the
 * rows, the median and the largest |error| in %. At most 1000 rows. */
typedef struct dt_sim_validation {
    int n;
    double median, largest;
} dt_sim_validation;
int dt_sim_validate(const char *path, FILE *out, dt_sim_validation *v, dt_error *err);

#endif
