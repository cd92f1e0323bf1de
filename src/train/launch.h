/* dtrain launch's supervision, as torchrun --max-restarts does it: the job (usually
 * `mpirun ... dtrain train ... --checkpoint DIR`) runs as a child in its own process
 * group (core/proc: an argument vector, no shell) with SIGTERM as its death signal;
 * when it fails it is started again with `--resume DIR` appended, up to `restarts`
 * times, after a delay that doubles while the job makes no progress (capped at
 * DT_LAUNCH_DELAY_CAP_S, or the base delay if larger; back to the base once an attempt
 * saved a newer checkpoint or ran that long). A usage error (exit 2) and the same
 * failure twice at the same checkpoint are not restarted. DIR is locked
 * (DIR/.launch.lock) for the whole supervision. The caller owns the signal handling:
 * its handler sets *stop_signal and sends the signal to the group in *child_group. */
#ifndef DTRAIN_LAUNCH_H
#define DTRAIN_LAUNCH_H

#include <signal.h>

enum { DT_LAUNCH_DELAY_CAP_S = 30 };

typedef struct dt_launch_opts {
    char *const *job; /* the command and its arguments */
    int job_argc;
    long restarts;
    double base_delay;                                /* seconds before the first restart */
    int quiet;                                        /* no restart lines (errors are still said) */
    volatile sig_atomic_t *child_group, *stop_signal; /* the caller's signal handler's */
    /* each line launch says: an error (error != 0) or a restart line */
    void (*say)(int error, const char *line);
} dt_launch_opts;

/* Supervises the job; returns launch's exit status: the job's last; 128 + N when
 * signal N stopped launch; 1 when the job cannot run or DIR is locked. */
int dt_launch_run(const dt_launch_opts *opts);

#endif
