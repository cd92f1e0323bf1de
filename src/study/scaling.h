/* The scaling study's maths and report: from one row per (process count, batch size
 * per process) of measured epoch times, the tables a systems course asks for.
 * Definitions (also printed in the report):
 *   strong speed-up  S(N) = T(1) / T(N), efficiency S(N) / N   (same per-process batch,
 *                    the whole dataset split over N processes; T = epoch time)
 *   weak speed-up    N * t(1) / t(N) with t the time of one iteration (the same work
 *                    per process per iteration), efficiency t(1) / t(N)
 *   derived split    T_comp(N) = T(1) / N, T_comm(N) = T(N) - T(1) / N
 *   bandwidth        iterations * 2(N-1)/N * 4 * params / T_comm per process, N times
 *                    that in aggregate. */
#ifndef DTRAIN_SCALING_H
#define DTRAIN_SCALING_H

#include <stdio.h>

#include "dtrain/error.h"

typedef struct dt_scale_row {
    int procs, batch;
    long iterations;         /* per process per epoch; 0 = unknown */
    double t_train, t_epoch; /* the measured epoch (the 2nd); t_epoch 0 = unknown */
    /* measured split (means over ranks), from run logs; negative = unknown */
    double t_data, t_compute, t_comm, t_comm_exposed;
    double bytes_sent;           /* per process per epoch; negative = unknown */
    double final_loss, test_acc; /* negative = unknown */
    int lr_scaled;               /* run with the linear scaling rule */
    /* Repeats: the figures above are medians over `repeats` runs (dt_scale_combine);
     * the spread of the times is [min, max]. */
    int repeats;
    double t_train_min, t_train_max, t_epoch_min, t_epoch_max;
    /* Cores other processes used during the run (the largest over the repeats;
     * negative = not measured) and whether that makes it a busy-machine figure. */
    double other_cores;
    int busy;
    /* Emulated hosts with a CPU quota: the largest share of quota periods in which a
     * host ran out of its quota (over the repeats; negative = no quota), and whether
     * that makes the run unfaithful to hosts of that share (then busy too: measured
     * again, left out of fits, named in the report). */
    double throttled;
    int unfaithful;
    /* each emulated host's CPU share in cores (the load record's; negative = none) */
    double host_cpus;
    /* Utilisation from the run's sys records (negative = none): mean CPU per rank in %
     * of one core, largest resident memory of a rank (MB), MPI and network bytes per
     * rank per second of the run (MB/s), the machine's other cores on average. */
    long sys_samples;
    double cpu_pct, rss_mb, mpi_mbs, net_mbs, sys_other_cores;
    double disk_read_mbs, disk_write_mbs; /* this rank's storage I/O (/proc/self/io), per s */
    int threads; /* compute threads per process (the run record's); 0 = unknown */
} dt_scale_row;

/* A row with every measured figure unknown (negative) and one repeat: what a reader
 * of partial data (a CSV of times, a simulation) starts from. */
dt_scale_row dt_scale_row_unknown(void);

/* Other processes using more than this many cores on average during a run make its
 * figures untrustworthy (a busy machine); --wait-idle waits for less. */
#define DT_SCALE_BUSY_CORES 0.25

/* A host that ran out of its CPU quota in more than this share of the quota's periods
 * held its messages while it waited (docs/scaling.md: 4 hosts at 0.5 cores, throttled in
 * 56-69% of periods, computed 23% over the share and tripled lenet5's exposed
 * communication); cpusets never throttle. A bound chosen, not measured between. */
#define DT_SCALE_THROTTLED_MAX 0.10

/* One role of one parameter-server run (a server or a worker) over the whole run,
 * from the run log's ps_server and worker records: the per-role accounting. */
typedef struct dt_scale_role {
    int procs, batch, lr_scaled, repeat; /* the config and which repeat (0 = first) */
    int is_server, index;                /* server number or worker rank */
    int epochs;
    double bytes_in, bytes_out;     /* whole run; a worker's in = received, out = sent */
    long updates, applied, dropped; /* servers; a worker's steps in updates */
    double busy_frac;               /* servers: busy time / the run's training loop time; -1 */
    double staleness_mean;          /* servers: mean staleness of applied gradients; -1 */
    long staleness_hist[16];
} dt_scale_role;

typedef struct dt_scale_study {
    char model[8448], data[8448]; /* the run record's whole; model: " (simulated)" added */
    char mode[32];                /* "allreduce", "ps-sync", ... ("" = unknown) */
    int servers;                  /* parameter servers on top of the process counts (ps modes) */
    double params;                /* parameters (floats exchanged per iteration) */
    double dataset_size;          /* training samples */
    dt_scale_row *rows;
    int n_rows, cap_rows;
    dt_scale_role *roles; /* parameter-server runs only */
    int n_roles, cap_roles;
    char comm_dtype[8]; /* gradients on the wire ("" = fp32) */
    /* The hardware the speed model divides compute over: cores (0 = unknown: compute
     * per process, M/N) and compute threads per process; cores_given: the user said
     * the hardware grows to `cores` (--cores), so recommendations may go that far. */
    int cores, threads, cores_given;
    char notes[8][256]; /* things the sweep could not do (memory stop, ...) */
    int n_notes;
    /* What `scale` predicted before it measured (predict.h: OUT/predicted.csv), or
     * none; owned here (dt_scale_free). */
    /* dt_scale_read_csv: only the rows whose model column says this ("" = every row,
     * which must then be of one model) */
    char model_only[64];
    struct dt_scale_predicted *predicted;
    int n_predicted;
    char predicted_on[128];     /* the network and the profiles the predictions assumed */
    char predicted_beyond[128]; /* ... and those past the machine */
    /* report --times --profile: the 1-process times rescaled the profile, so their
     * predictions equal them by construction and are left out of the error */
    int predicted_calibrated;
    /* OUT/drift.csv read: each pass's factor (median over batches), pass 1 first */
    double drift[16];
    int n_drift;
    /* Time to a target loss (tta.h), worked out from the run logs by the report, or
     * NULL; owned here. target_loss: --target-loss (<= 0: the default rule). */
    struct dt_scale_tta *tta;
    double target_loss;
    /* The system the runs ran on, from the first run record that says it (logs from
     * before have none: ""/0), and the most hosts any run spanned */
    char sys_cpu[128], sys_isa[32], sys_libraries[288], sys_version[96], sys_host[96];
    int sys_cpus, hosts_max;
    double sys_memory_gib;
} dt_scale_study;

int dt_scale_add_row(dt_scale_study *s, const dt_scale_row *row, dt_error *err);
int dt_scale_add_role(dt_scale_study *s, const dt_scale_role *role, dt_error *err);
void dt_scale_add_note(dt_scale_study *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void dt_scale_free(dt_scale_study *s);
/* Merges the rows of the same (procs, batch, lr_scaled) - a config's repeats - into
 * one: medians of every figure, min and max of the times, the largest other_cores;
 * marks busy rows. Rows added one per run must pass through it once, before the
 * report. */
int dt_scale_combine(dt_scale_study *s, dt_error *err);

/* The row for (procs, batch, lr_scaled), or NULL. */
const dt_scale_row *dt_scale_find(const dt_scale_study *s, int procs, int batch, int lr_scaled);

/* The log of a config's run in dir: run_p<N>_b<B>[_lrlinear][_r<k+1>].jsonl (repeat k,
 * 0 the first, keeps the plain name). */
void dt_scale_log_path(char *out, size_t size, const char *dir, int procs, int batch, int scaled,
                       int repeat);
/* The distinct process counts (batch = 0) or batch sizes (batch = 1) of the rows
 * without LR scaling, ascending, at most 64; returns how many. */
int dt_scale_distinct(const dt_scale_study *s, int batch, int out[64]);

/* Derived figures of one row against its 1-process row (NULL-safe: returns -1 when a
 * figure cannot be computed). */
/* The time speed-ups and the derived split use: the training time t_train (loader
 * waits are not communication), else the running time t_epoch; -1 when neither is
 * known (a log without them: every figure from it is then unknown, never 0). */
double dt_scale_time(const dt_scale_row *r);
/* Iterations per process per epoch: the row's, else the dataset split over procs
 * (-1: unknown). */
double dt_scale_iterations(const dt_scale_study *s, const dt_scale_row *r);
double dt_scale_split_iterations(double dataset_size, int procs, int batch);
double dt_scale_strong_speedup(const dt_scale_study *s, const dt_scale_row *r);
/* The strong speed-up's spread over the repeats: [T1 min / TN max, T1 max / TN min]
 * (the time the speed-up uses); -1 when unknown. */
int dt_scale_strong_speedup_range(const dt_scale_study *s, const dt_scale_row *r, double *lo,
                                  double *hi);
/* Whether a speed-up of r leans on a busy-machine figure (r's or its 1-process row's). */
int dt_scale_speedup_busy(const dt_scale_study *s, const dt_scale_row *r);
double dt_scale_weak_speedup(const dt_scale_study *s, const dt_scale_row *r);
/* T(N) - T(1)/N: -1 without a 1-process row, NaN when a time is unknown (a negative
 * value is a real one: faster than ideal). */
double dt_scale_derived_comm(const dt_scale_study *s, const dt_scale_row *r);
/* iterations * 2(N-1)/N * 4 * params / T_comm, bytes/s per process (-1 if unknown). */
double dt_scale_bandwidth(const dt_scale_study *s, const dt_scale_row *r, double t_comm);

#endif
