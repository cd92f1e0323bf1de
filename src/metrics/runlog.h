/* The run log: JSON Lines, one object per event, written by rank 0. This module owns
 * the format: one field list per event drives both the writer and the reader, so no
 * other code knows a field name. Events: "run" (once, first), "step", "epoch",
 * "ps_server" and "ps_epoch" (parameter-server statistics, after the last epoch),
 * "eval" (test figures during training), "sys" (resource samples, sysmon.h), "worker" (each
 * training rank's totals) and "load" (what else ran on the machine during a sweep's run, appended
 * by the sweep).
 *
 * Writing keeps the historical bytes: compact, fields in the documented order,
 * %.9g for step/epoch reals, %g for the run's, %.6g for busy_s; strings are
 * JSON-escaped; a non-finite real is written as null (printf's "nan" is not JSON).
 *
 * Reading parses every line with cJSON, so any valid JSON reads the same: whitespace,
 * key order, extra fields, unknown events, 1e-3 or 0.001, 5.0 for an integer field.
 * The tokens nan/inf (old logs) and NaN/Infinity (Python's json.dumps) read as
 * non-finite reals, as does null. A field absent from a line reads as -1 (integers),
 * NAN (reals), "" (strings); a few fields are required (step: rank, step, loss;
 * epoch: epoch; ps_server/ps_epoch: server). A line that is not JSON, or holds a
 * known field of the wrong type, is an error naming file:line - except a last line
 * without its newline that does not parse (a run killed while writing), which is
 * skipped and counted in dt_runlog_contents.truncated_lines. */
#ifndef DTRAIN_RUNLOG_H
#define DTRAIN_RUNLOG_H

#include <stdio.h>

#include "dtrain/error.h"

typedef struct dt_runlog {
    FILE *file;        /* NULL: logging off */
    int write_failed;  /* errno of the first failed write (reported at close), or 0 */
    int flush_all;     /* flush every record, not only epochs (a resumable run: the step
                        * records a kill cuts short count the work lost) */
    long hashed;       /* bytes of the file's start that crc covers (dt_runlog_prefix) */
    unsigned long crc; /* zlib crc32 of them */
} dt_runlog;

/* How the run was set up; the "run" event. */
typedef struct dt_run_record {
    char model[8400]; /* a zoo name or an ONNX path, whole (room as for data below) */
    long long params;
    int procs; /* all ranks (servers included in the parameter-server modes) */
    char mode[32];
    int batch_size, global_batch;
    /* a spec with a path of up to PATH_MAX, read back with room for each byte that is
     * not UTF-8 becoming two (runlog.c's write_string) */
    char data[8400];
    int dataset_size;
    long steps_per_epoch;
    int epochs;
    double lr;
    char lr_scaling[16];
    double warmup_epochs, momentum, weight_decay;
    char lr_schedule[16]; /* constant, cosine, step: as given, else the model's recipe */
    int threads, loader_workers;
    char threads_from[200]; /* why that many threads: "--threads", or the default's rule */
    char allreduce[16];
    char comm_dtype[8];      /* gradients on the wire: fp32, bf16, fp16 */
    char precision[8];       /* conv2d's multiplies: fp32, bf16 */
    char overlap_why[160];   /* how --overlap was decided (all-reduce runs; "" otherwise) */
    char allreduce_used[96]; /* what --allreduce resolved to (shm, ring, ...; ditto) */
    double bucket_mb;
    int buckets;
    int overlap;             /* boolean in the file */
    unsigned long long seed; /* read exactly up to 2^53 (JSON numbers are doubles) */
    int workers, servers;
    char version[96]; /* dtrain --version of the binary that ran: "0.9.0 (commit)" */
    /* the CPU quota rank 0's cgroup gives it, in cores (an emulated host's share, a
     * container's --cpus); 0: none; NAN in logs from before */
    double cpu_quota;
    /* the machine (core/sysinfo.h) and the libraries: for the report's system table */
    char cpu[128];
    int cpus;
    double memory_gib;
    char isa[32];
    char libraries[288]; /* oneDNN, OpenBLAS and, under MPI, the MPI library */
    int hosts;           /* distinct hosts among the workers (emulated ones count) */
    char host[96];       /* the first worker's (core/proc.h's dt_proc_host_name) */
} dt_run_record;

typedef struct dt_step_record {
    int rank, epoch;
    long step;
    double loss, lr;
    double t_data, t_compute, t_comm, t_comm_exposed;
    long long bytes_sent;
    /* parameter-server mode: pull and push times (t_comm = their sum, all exposed) and
     * bytes received with the pull; 0 otherwise */
    double t_pull, t_push, t_wait; /* t_wait: the part of t_pull spent waiting to be served */
    long long bytes_received;
} dt_step_record;

/* Times are per-epoch sums; across ranks the plain names hold the maximum (the
 * critical path) and *_mean the mean. */
typedef struct dt_epoch_record {
    int epoch;
    double train_loss, train_acc, test_loss, test_acc;
    double t_epoch, t_train, t_data, t_compute, t_comm, t_comm_exposed;
    double t_epoch_mean, t_train_mean, t_data_mean, t_compute_mean, t_comm_mean,
        t_comm_exposed_mean;
    double t_eval;        /* evaluation on the test set, after (not in) t_epoch */
    long long bytes_sent; /* all ranks */
    long long images;     /* all ranks */
    /* --allreduce auto: per bucket size, what it measured and chose ("" otherwise) */
    char allreduce_auto[1024];
    char bucket_auto[256]; /* --bucket-mb auto: each size's median step and the choice */
    /* the rank the others waited for more than DT_STRAGGLER_SHARE of a step
     * (metrics/straggler.h), -1 none: its host, how much slower its own work a step
     * was than the others' median, and how long they waited for it a step */
    int straggler;
    char straggler_host[96];
    double straggler_slower, straggler_wait;
} dt_epoch_record;

/* Staleness histogram bins (the last holds >= bins-1); the parameter server's count. */
enum { DT_RUNLOG_STALENESS_BINS = 16 };

/* One parameter server's statistics over the whole run. */
typedef struct dt_ps_server_record {
    int server;
    long updates, applied, dropped;
    double busy_s;
    long long bytes_in, bytes_out;
    long max_clock_gap; /* ssp: largest (fastest - slowest) worker clock at a served pull */
    long staleness_hist[DT_RUNLOG_STALENESS_BINS];
} dt_ps_server_record;

/* The same per epoch of the pushing worker. */
typedef struct dt_ps_epoch_record {
    int server, epoch;
    long dropped;
    long staleness_hist[DT_RUNLOG_STALENESS_BINS];
} dt_ps_epoch_record;

/* A run continued from a checkpoint (--resume): the step it continues at, the epoch,
 * the processes now and the step records of the interrupted run dropped from the log
 * because they came after the checkpoint (work lost). */
typedef struct dt_resume_record {
    long step;
    int epoch, procs;
    long lost_steps;
} dt_resume_record;
/* One resource sample of one rank (sysmon.h): CPU figures over the interval before
 * t, byte counts since the run's start. -1 = unknown (dt_sysmon_cpu_between says when). */
typedef struct dt_sys_record {
    int rank;                 /* among the workers, or the server's number */
    char role[8];             /* "worker" or "server" ("" in older logs: a worker) */
    double t;                 /* seconds since the sampler started */
    double cpu_user, cpu_sys; /* this process, % of one core */
    double machine_cpu;       /* the whole machine, % of all its cores */
    int cores;                /* online cores */
    double other_cores;       /* machine busy cores minus this process's */
    long long rss_bytes;      /* resident memory */
    long long net_rx, net_tx; /* network interfaces other than loopback */
    long long mpi_sent;       /* bytes dtrain sent over MPI (any transport) */
    long long disk_read, disk_write;
} dt_sys_record;

/* A test-set evaluation during training (--eval-every): after `step` steps. */
typedef struct dt_eval_record {
    int epoch;
    long step;      /* steps done (all epochs) */
    double t;       /* wall seconds since training started */
    double t_train; /* the same without the time spent evaluating */
    double test_loss, test_acc;
    long samples; /* test samples evaluated */
} dt_eval_record;

/* One training rank's totals over the run (every step's figures summed), written by
 * rank 0 for every worker at the end: the per-role accounting of a run. */
typedef struct dt_worker_record {
    int rank; /* among the workers */
    long steps;
    long long bytes_sent, bytes_received; /* as the step records count them */
    double t_comm;                        /* seconds communicating */
} dt_worker_record;

/* What the rest of the machine did during one run of a sweep: the machine's busy CPU
 * time less the run's own processes' (all of its ranks and mpirun), over its wall
 * time; a figure per run, written by the sweep after the run ends. */
typedef struct dt_load_record {
    double wall_s;
    double machine_cores; /* busy cores on average */
    double run_cores;     /* the run's own processes, on average */
    double other_cores;   /* the rest: machine_cores - run_cores (>= 0) */
    int cores;            /* online cores */
    /* The machine's idle share over the run and its least over any second of it
     * (sampled by the sweep; NAN in logs from before) */
    double idle_mean, idle_min;
    /* Emulated hosts with a CPU share (hostcpu.h): each host's share in cores, and the
     * largest share of its quota periods in which a host ran out of its quota (0 for
     * CPUs of its own; NAN: no shares) */
    double host_cpus, throttled_max;
    double host_used_min; /* the least CPU any host used, in cores on average (NAN: none) */
} dt_load_record;

/* ---- writing ---- */

/* path NULL or "" turns logging off. */
int dt_runlog_open(dt_runlog *log, const char *path, dt_error *err);
/* Continues the log at path written by an interrupted run: checks that its first
 * `offset` bytes (where it stood at the checkpoint) have the checkpoint's crc32, cuts
 * it back to them and appends after that. *lost_steps counts the step records cut.
 * Refused, the file left as it was, when it is gone, not a regular file, shorter or
 * different (the error, without a prefix, names it and what to do). */
int dt_runlog_open_resume(dt_runlog *log, const char *path, long offset, unsigned long crc,
                          long *lost_steps, dt_error *err);
/* The bytes written so far, flushed (-1 with logging off or on a failed flush). */
long dt_runlog_offset(dt_runlog *log);
/* The same, and the crc32 of those bytes (for a checkpoint): each call reads back
 * only what was written since the last. -1 with logging off or on a failed read. */
int dt_runlog_prefix(dt_runlog *log, long *offset, unsigned long *crc);
void dt_runlog_resume(dt_runlog *log, const dt_resume_record *r);
void dt_runlog_run(dt_runlog *log, const dt_run_record *r);
void dt_runlog_step(dt_runlog *log, const dt_step_record *r);
void dt_runlog_epoch(dt_runlog *log, const dt_epoch_record *r);
void dt_runlog_ps_server(dt_runlog *log, const dt_ps_server_record *r);
void dt_runlog_ps_epoch(dt_runlog *log, const dt_ps_epoch_record *r);
void dt_runlog_sys(dt_runlog *log, const dt_sys_record *r);
void dt_runlog_worker(dt_runlog *log, const dt_worker_record *r);
void dt_runlog_eval(dt_runlog *log, const dt_eval_record *r);
/* Appends a load record to an existing log (the sweep, after the run). */
int dt_runlog_append_load(const char *path, const dt_load_record *r, dt_error *err);
/* Reports any write that failed since open. */
int dt_runlog_close(dt_runlog *log, dt_error *err);

/* ---- reading ---- */

typedef enum dt_runlog_event {
    DT_EVENT_OTHER, /* an event this reader does not know: ignored */
    DT_EVENT_RUN,
    DT_EVENT_STEP,
    DT_EVENT_EPOCH,
    DT_EVENT_PS_SERVER,
    DT_EVENT_PS_EPOCH,
    DT_EVENT_RESUME,
    DT_EVENT_SYS,
    DT_EVENT_LOAD,
    DT_EVENT_WORKER,
    DT_EVENT_EVAL
} dt_runlog_event;

typedef struct dt_runlog_entry {
    dt_runlog_event event;
    union {
        dt_run_record run;
        dt_step_record step;
        dt_epoch_record epoch;
        dt_ps_server_record ps_server;
        dt_ps_epoch_record ps_epoch;
        dt_resume_record resume;
        dt_sys_record sys;
        dt_load_record load;
        dt_worker_record worker;
        dt_eval_record eval;
    };
} dt_runlog_entry;

/* Parses one line (one JSON object, trailing whitespace allowed). On error, err says
 * what is wrong with the line; the caller adds where it is. */
int dt_runlog_parse_line(const char *line, dt_runlog_entry *entry, dt_error *err);

/* A whole run log, records in file order. */
typedef struct dt_runlog_contents {
    int has_run;       /* a "run" record was seen */
    dt_run_record run; /* the last one seen */
    dt_step_record *steps;
    long n_steps;
    dt_epoch_record *epochs;
    long n_epochs;
    dt_ps_server_record *ps_servers;
    long n_ps_servers;
    dt_ps_epoch_record *ps_epochs;
    long n_ps_epochs;
    dt_sys_record *sys;
    long n_sys;
    dt_worker_record *workers;
    long n_workers;
    dt_eval_record *evals;
    long n_evals;
    int has_load;         /* a "load" record was seen */
    dt_load_record load;  /* the last one */
    long unknown_events;  /* lines of other events, ignored */
    long truncated_lines; /* 0 or 1: a cut-short last line, skipped */
} dt_runlog_contents;

/* Reads path; errors name the file and line. Free with dt_runlog_contents_free. */
/* s as a JSON string to f: quotes, backslashes and control characters escaped, valid
 * UTF-8 as it is, any other byte as \u00XX (its Latin-1 character). -1 on a write
 * error. The run log's strings and the trace's (trace.h) are written by it. */
int dt_json_write_string(FILE *f, const char *s);

int dt_runlog_load(const char *path, dt_runlog_contents *c, dt_error *err);
void dt_runlog_contents_free(dt_runlog_contents *c);

#endif
