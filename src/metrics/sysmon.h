/* The resource sampler behind the run log's `sys` records (dstat, built in): a thread
 * per rank wakes every `interval_s` and reads this process's CPU time (user, system:
 * getrusage, in microseconds, where /proc/self/stat counts 10 ms ticks) and /proc -
 * resident memory, the machine's CPU time (/proc/stat), the bytes of the
 * network interfaces other than loopback (/proc/net/dev) and this process's disk
 * bytes (/proc/self/io) - plus the bytes dtrain itself sent over MPI (the trainer adds
 * them with dt_sysmon_add_mpi_bytes). Samples wait in memory until the trainer drains
 * them (dt_sysmon_take) at an epoch's end, so the thread never writes the log and
 * never calls MPI. No global state: everything lives in the dt_sysmon. */
#ifndef DTRAIN_SYSMON_H
#define DTRAIN_SYSMON_H

#include <pthread.h>
#include <stdatomic.h>

#include "dtrain/error.h"
#include "metrics/runlog.h"

/* What a sample's CPU figures are differences of, read back to back so the process's
 * and the machine's figures cover the same interval. */
typedef struct dt_sys_reading {
    double t;                       /* dt_now() midway through the reading */
    double proc_user, proc_sys;     /* this process's CPU seconds (getrusage) */
    unsigned long long busy, total; /* the machine's ticks (/proc/stat) */
    int have_proc, have_machine;    /* 0: that part could not be read */
} dt_sys_reading;

typedef struct dt_sysmon {
    int rank;
    double interval_s;
    double started; /* dt_now() at start: the records' t */
    long ticks_per_s, cores;
    atomic_llong mpi_bytes; /* sent by dtrain over MPI since start */
    dt_sys_reading prev;    /* the last interval's end: the next one's start */
    long long net_rx0, net_tx0, disk_read0, disk_write0;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop, running;
    pthread_t thread;
    dt_sys_record *records; /* under lock */
    long n_records, cap_records;
} dt_sysmon;

/* Starts the sampler thread. Each record covers at least one interval: the next sample
 * is due an interval after the last one was taken, so a thread woken late never follows
 * with a sample moments later. */
int dt_sysmon_start(dt_sysmon *m, int rank, double interval_s, dt_error *err);
/* Stops the thread and frees the samples not yet taken. */
void dt_sysmon_stop(dt_sysmon *m);
void dt_sysmon_add_mpi_bytes(dt_sysmon *m, long long bytes);
/* Moves the samples taken so far into *out (malloc'd; caller frees), *n of them.
 * Returns -1 only when out of memory. */
int dt_sysmon_take(dt_sysmon *m, dt_sys_record **out, long *n);

/* The CPU figures of *r (cpu_user, cpu_sys, machine_cpu, other_cores) over the interval
 * from reading a to reading b, on a machine of `cores` cores counting `ticks_per_s` in
 * /proc/stat. A figure is -1 (unknown) when a part it needs is: the process's counters
 * for cpu_user and cpu_sys (both or neither), the machine's for machine_cpu (also when
 * its ticks did not advance), both for other_cores. Returns 1, filling nothing, when the
 * interval is too short to measure (under two ticks of wall time): the caller keeps a
 * and measures the next interval from it, so the short one is merged into the next
 * rather than divided by nearly nothing. Returns 0 when filled. */
int dt_sysmon_cpu_between(const dt_sys_reading *a, const dt_sys_reading *b, long cores,
                          long ticks_per_s, dt_sys_record *r);

/* One reading of the machine's CPU ticks from /proc/stat: busy (all but idle and
 * iowait) and total; -1 if /proc/stat cannot be read. For the sweep's load checks. */
int dt_sysmon_machine_ticks(unsigned long long *busy, unsigned long long *total);

#endif
