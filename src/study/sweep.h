/* The scaling sweep behind `dtrain scale`: runs every (batch size per process,
 * process count) configuration with mpirun, each writing its run log into the output
 * folder, shows progress, resumes (a config whose log holds all its epochs is not run
 * again unless forced), stops the batch sizes cleanly at the first that does not fit
 * in memory, and reads the logs back into a dt_scale_study. Each config may run
 * several times (repeats, interleaved: all configs, then all again), the rows then
 * combined into medians with their spread; after each run the sweep appends a `load`
 * record to its log: the cores other processes used meanwhile (the machine's busy
 * time from /proc/stat less the run's own CPU time from wait4). */
#ifndef DTRAIN_SWEEP_H
#define DTRAIN_SWEEP_H

#include "dtrain/error.h"
#include "study/scaling.h"
#include "train/trainer.h"

typedef struct dt_sweep_config {
    const char *dtrain; /* path of the dtrain binary to run */
    const char *out_dir;
    /* The training config of every run; each run sets its batch size, log path and
     * LR scaling on a copy and passes it as `dtrain train` flags (train_flags.h).
     * A parameter-server mode makes procs count workers (servers come on top). */
    dt_train_config train;
    const int *batches; /* ascending */
    int n_batches;
    const int *procs; /* ascending */
    int n_procs;
    int lr_scaling; /* also run each multi-process config with linear LR scaling */
    int force, quiet;
    int repeats;            /* runs per config, interleaved (0 or 1: once) */
    int wait_idle;          /* wait for a quiet machine before each run */
    double wait_idle_max_s; /* ... at most this long, then run anyway (noted) */
    /* Where multi-process runs go (all NULL: this machine). NULL-terminated argv words
     * put before "mpirun" (ip netns exec NS) and after "-np N" (--host, --mca ...), and
     * a line recorded with each run's settings ("hosts netns:4 link 1gbit"), so a log
     * made elsewhere is not reused. */
    const char *const *launch_pre;
    const char *const *mpirun_extra;
    const char *hosts;
    /* Emulated hosts' CPU shares (hostcpu.h), whose counters each run's load record
     * sums up; NULL: none */
    const struct dt_hostcpu *hostcpu;
    /* The emulated hosts (netns.h), whose processes a launch that hung lists; NULL:
     * none */
    const struct dt_netns *netns;
    /* The study's network (predict.h): with repeats, the model is profiled again alone
     * before each later pass's first run (dt_scale_profile_drift); NULL: not */
    const struct dt_scale_network *network;
    /* Inside a Slurm allocation: multi-process runs start as `srun -n N --mpi=pmix`
     * (--mpi=$SLURM_MPI_TYPE when set) instead of mpirun, recorded with each run's
     * settings ("launcher srun"). */
    int srun;
    double target_loss; /* the report's time to target (--target-loss; <= 0: default) */
} dt_sweep_config;

/* The settings of one config's run (repeat k: 0 the first), as recorded beside its log
 * (LOG.args): the process count and the child's `dtrain train` flags, one per line;
 * repeat k runs with --seed + k. A finished log is reused only when its recorded
 * settings equal the sweep's. */
int dt_sweep_args(const dt_sweep_config *cfg, int procs, int batch, int scaled, int repeat,
                  char *out, size_t size, dt_error *err);

/* mkdir -p. */
int dt_make_dirs(const char *path, dt_error *err);

/* SIGINT and SIGTERM during the sweep end the running config's processes and make it
 * return -1 (between configs too), so the caller can tear down what it set up. */
int dt_sweep_run(const dt_sweep_config *cfg, dt_scale_study *study, dt_error *err);

/* Reads one run log into a row (the 2nd epoch's times, the last epoch's loss and
 * accuracy); *complete says whether it holds all the epochs the run asked for. */
int dt_scale_row_from_log(const char *path, dt_scale_study *study, dt_scale_row *row, int *complete,
                          dt_error *err);

/* Reads every run_*.jsonl of a folder (what `dtrain report DIR` does), repeats
 * combined. */
int dt_scale_read_dir(const char *dir, dt_scale_study *study, dt_error *err);

/* ---- `dtrain scale`'s setup (sweep_setup.c): messages name the flag ---- */

#define DT_SWEEP_MAX_GRID  32 /* batch sizes, process counts */
#define DT_SWEEP_MAX_MODES 8

/* "32,128,512" -> ascending positive integers, at most max: the count, or -1. */
int dt_sweep_parse_ints(const char *flag, const char *text, int *out, int max, dt_error *err);
/* --bucket-sizes "1,5,25" -> ascending MiB values, at most max: the count, or -1. */
int dt_sweep_parse_mib(const char *text, double *out, int max, dt_error *err);
/* --modes "allreduce,ps-sync" -> training modes, each once: the count, or -1. */
int dt_sweep_parse_modes(const char *text, char modes[DT_SWEEP_MAX_MODES][32], dt_error *err);
/* --host-cpus "0.5", "cpuset" or "none" -> a quota in cores per emulated host (0: none)
 * or *cpuset. */
int dt_sweep_parse_host_cpus(const char *text, double *cpus, int *cpuset, dt_error *err);
/* --hosts "netns:H" -> H. */
int dt_sweep_parse_hosts(const char *text, long *hosts, dt_error *err);

/* Where scale's runs go, as its flags said. */
typedef struct dt_scale_places {
    const char *hosts_text, *link_text, *hostfile; /* as given, or NULL */
    long hosts, ranks_per_host;
    const char *host_cpus_text; /* --host-cpus as given, or NULL (default share) */
    double host_cpus;           /* its quota in cores; 0 = none (today's emulation) */
    int host_cpuset;            /* --host-cpus cpuset: CPUs of their own */
    int procs_given, n_modes, n_buckets;
} dt_scale_places;

/* The flags that exclude or need each other, --hostfile readable, the process counts
 * (with --hosts and no --procs: 1, 2, 4, ... and every slot) into procs (room for
 * DT_SWEEP_MAX_GRID) and cfg. A usage error: -1. */
int dt_scale_check_places(const dt_scale_places *s, dt_sweep_config *cfg, int *procs,
                          dt_error *err);
/* After the model and data are known: with --max-samples and no --test-samples the
 * same share of the test split; without --batch-sizes 32, x4, up to the per-process
 * share of the data, into batches (room for DT_SWEEP_MAX_GRID) and cfg. */
int dt_scale_fill_defaults(dt_sweep_config *cfg, int *batches, dt_error *err);

#endif
