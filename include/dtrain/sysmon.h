/* The resource sampler behind the run log's `sys` records (dstat, built in): a thread
 * per rank wakes every `interval_s` and reads /proc - this process's CPU time (user,
 * system) and resident memory, the machine's CPU time (/proc/stat), the bytes of the
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
#include "dtrain/runlog.h"

typedef struct dt_sysmon {
    int rank;
    double interval_s;
    double started; /* dt_now() at start: the records' t */
    long ticks_per_s, cores;
    atomic_llong mpi_bytes; /* sent by dtrain over MPI since start */
    /* the previous sample, for per-interval CPU figures */
    double prev_t, prev_proc_user, prev_proc_sys; /* seconds of CPU */
    unsigned long long prev_busy, prev_total;     /* /proc/stat ticks */
    long long net_rx0, net_tx0, disk_read0, disk_write0;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop, running;
    pthread_t thread;
    dt_sys_record *records; /* under lock */
    long n_records, cap_records;
} dt_sysmon;

/* Starts the sampler thread (the first record comes after one interval). */
int dt_sysmon_start(dt_sysmon *m, int rank, double interval_s, dt_error *err);
/* Stops the thread and frees the samples not yet taken. */
void dt_sysmon_stop(dt_sysmon *m);
void dt_sysmon_add_mpi_bytes(dt_sysmon *m, long long bytes);
/* Moves the samples taken so far into *out (malloc'd; caller frees), *n of them.
 * Returns -1 only when out of memory. */
int dt_sysmon_take(dt_sysmon *m, dt_sys_record **out, long *n);

/* One reading of the machine's CPU ticks from /proc/stat: busy (all but idle and
 * iowait) and total; -1 if /proc/stat cannot be read. For the sweep's load checks. */
int dt_sysmon_machine_ticks(unsigned long long *busy, unsigned long long *total);

#endif
