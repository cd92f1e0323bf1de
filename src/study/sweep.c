#define _GNU_SOURCE
#include "study/sweep.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/outfile.h"
#include "core/proc.h"
#include "core/textfile.h"
#include "core/timer.h"
#include "metrics/runlog.h"
#include "metrics/sysmon.h"
#include "train/train_flags.h"
#include "train/train_mode.h"
#include "study/hostcpu.h"
#include "study/netns.h"
#include "study/predict.h"

/* A real read from a log, or `unknown` when the field was absent or not finite. */
static double known(double v, double unknown) {
    return isfinite(v) ? v : unknown;
}

/* Copies src into dst[size], cut to fit (a study's names are for display). */
static void copy_text(char *dst, size_t size, const char *src) {
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* The utilisation figures of a row from the log's sys records: CPU and other cores as
 * means over every sample, memory the largest, MPI and network bytes per rank as each
 * rank's last count over its last t, averaged over the ranks. */
static void sys_summary(const dt_runlog_contents *log, dt_scale_row *row) {
    row->sys_samples = log->n_sys;
    row->cpu_pct = row->rss_mb = row->mpi_mbs = row->net_mbs = row->sys_other_cores = -1;
    row->disk_read_mbs = row->disk_write_mbs = -1;
    if (log->n_sys == 0) return;
    double cpu = 0, other = 0, rss = 0;
    long n_cpu = 0, n_other = 0;
    enum { MAX_RANKS = 1024 };
    double mpi_rate[MAX_RANKS], net_rate[MAX_RANKS], last_t[MAX_RANKS];
    double read_rate[MAX_RANKS], write_rate[MAX_RANKS];
    for (int r = 0; r < MAX_RANKS; r++)
        mpi_rate[r] = net_rate[r] = last_t[r] = read_rate[r] = write_rate[r] = -1.0;
    for (long i = 0; i < log->n_sys; i++) {
        const dt_sys_record *x = &log->sys[i];
        if (x->cpu_user >= 0 && x->cpu_sys >= 0) cpu += x->cpu_user + x->cpu_sys, n_cpu++;
        if (x->other_cores >= 0) other += x->other_cores, n_other++;
        if (x->rss_bytes / 1e6 > rss) rss = x->rss_bytes / 1e6;
        /* servers after the workers: their numbers start at 0 too */
        const int key = x->rank + (!strcmp(x->role, "server") ? MAX_RANKS / 2 : 0);
        if (x->rank < 0 || key >= MAX_RANKS || !(x->t > last_t[key])) continue;
        last_t[key] = x->t;
        mpi_rate[key] = x->mpi_sent >= 0 ? x->mpi_sent / x->t / 1e6 : -1.0;
        net_rate[key] =
            x->net_tx >= 0 && x->net_rx >= 0 ? (x->net_tx + x->net_rx) / x->t / 1e6 : -1.0;
        read_rate[key] = x->disk_read >= 0 ? x->disk_read / x->t / 1e6 : -1.0;
        write_rate[key] = x->disk_write >= 0 ? x->disk_write / x->t / 1e6 : -1.0;
    }
    double mpi = 0, net = 0, rd = 0, wr = 0;
    int n_mpi = 0, n_net = 0, n_rd = 0, n_wr = 0;
    for (int r = 0; r < MAX_RANKS; r++) {
        if (mpi_rate[r] >= 0) mpi += mpi_rate[r], n_mpi++;
        if (net_rate[r] >= 0) net += net_rate[r], n_net++;
        if (read_rate[r] >= 0) rd += read_rate[r], n_rd++;
        if (write_rate[r] >= 0) wr += write_rate[r], n_wr++;
    }
    row->disk_read_mbs = n_rd ? rd / n_rd : -1;
    row->disk_write_mbs = n_wr ? wr / n_wr : -1;
    row->cpu_pct = n_cpu ? cpu / n_cpu : -1;
    row->sys_other_cores = n_other ? other / n_other : -1;
    row->rss_mb = rss > 0 ? rss : -1;
    row->mpi_mbs = n_mpi ? mpi / n_mpi : -1;
    row->net_mbs = n_net ? net / n_net : -1;
}

/* The repeat a log holds, from its name (..._r<k>.jsonl is repeat k-1; else 0). */
static int repeat_of(const char *path) {
    const char *r = strrchr(path, '_');
    if (!r || r[1] != 'r' || r[2] < '0' || r[2] > '9') return 0;
    char *end;
    errno = 0;
    const long k = strtol(r + 2, &end, 10);
    if (errno || strcmp(end, ".jsonl") || k < 2 || k > INT_MAX) return 0;
    return (int)k - 1;
}

/* The per-role accounting of a parameter-server log: each server's record, each
 * worker's totals. */
static int add_roles(const char *path, const dt_runlog_contents *log, const dt_scale_row *row,
                     dt_scale_study *study, dt_error *err) {
    if (log->n_ps_servers == 0) return 0;
    double loop_time = 0; /* the training loops' time: what the servers were busy within */
    for (long e = 0; e < log->n_epochs; e++)
        if (isfinite(log->epochs[e].t_epoch)) loop_time += log->epochs[e].t_epoch;
    dt_scale_role base = {.procs = row->procs,
                          .batch = row->batch,
                          .lr_scaled = row->lr_scaled,
                          .repeat = repeat_of(path),
                          .epochs = log->run.epochs > 0 ? log->run.epochs : (int)log->n_epochs,
                          .busy_frac = -1,
                          .staleness_mean = -1};
    for (long i = 0; i < log->n_ps_servers; i++) {
        const dt_ps_server_record *x = &log->ps_servers[i];
        dt_scale_role r = base;
        r.is_server = 1;
        r.index = x->server;
        r.bytes_in = (double)x->bytes_in;
        r.bytes_out = (double)x->bytes_out;
        r.updates = x->updates;
        r.applied = x->applied;
        r.dropped = x->dropped;
        r.busy_frac = loop_time > 0 && isfinite(x->busy_s) ? x->busy_s / loop_time : -1;
        double n = 0, sum = 0;
        for (int b = 0; b < DT_RUNLOG_STALENESS_BINS; b++) {
            r.staleness_hist[b] = x->staleness_hist[b];
            n += (double)x->staleness_hist[b];
            sum += (double)b * (double)x->staleness_hist[b];
        }
        r.staleness_mean = n > 0 ? sum / n : -1;
        if (dt_scale_add_role(study, &r, err)) return -1;
    }
    for (long i = 0; i < log->n_workers; i++) {
        const dt_worker_record *x = &log->workers[i];
        dt_scale_role r = base;
        r.index = x->rank;
        r.bytes_in = (double)x->bytes_received;
        r.bytes_out = (double)x->bytes_sent;
        r.updates = x->steps;
        r.applied = r.dropped = -1;
        if (dt_scale_add_role(study, &r, err)) return -1;
    }
    return 0;
}

int dt_scale_row_from_log(const char *path, dt_scale_study *study, dt_scale_row *row, int *complete,
                          dt_error *err) {
    dt_runlog_contents log;
    if (dt_runlog_load(path, &log, err)) return -1;
    if (!log.has_run) {
        dt_runlog_contents_free(&log);
        return dt_error_set(err, "%s: no \"run\" record (not a dtrain run log?)", path);
    }
    memset(row, 0, sizeof *row);
    const dt_run_record *run = &log.run;
    /* workers scale the study; parameter servers come on top */
    row->procs = run->workers >= 0 ? run->workers : run->procs >= 0 ? run->procs : 1;
    row->batch = run->batch_size >= 0 ? run->batch_size : 0;
    row->iterations = run->steps_per_epoch >= 0 ? run->steps_per_epoch : 0;
    row->lr_scaled = !strcmp(run->lr_scaling, "linear");
    if (run->params >= 0) study->params = (double)run->params;
    if (run->dataset_size >= 0) study->dataset_size = run->dataset_size;
    if (run->mode[0] && strcmp(run->mode, "single"))
        copy_text(study->mode, sizeof study->mode, run->mode);
    if (run->servers > 0) study->servers = run->servers;
    if (run->threads > 0) study->threads = run->threads;
    row->threads = run->threads > 0 ? run->threads : 0;
    if (run->comm_dtype[0]) copy_text(study->comm_dtype, sizeof study->comm_dtype, run->comm_dtype);
    if (log.has_load && log.load.cores > 0 && !study->cores_given) study->cores = log.load.cores;
    if (run->model[0]) copy_text(study->model, sizeof study->model, run->model);
    if (run->cpu[0] && !study->sys_cpu[0]) {
        copy_text(study->sys_cpu, sizeof study->sys_cpu, run->cpu);
        copy_text(study->sys_isa, sizeof study->sys_isa, run->isa);
        copy_text(study->sys_libraries, sizeof study->sys_libraries, run->libraries);
        copy_text(study->sys_version, sizeof study->sys_version, run->version);
        copy_text(study->sys_host, sizeof study->sys_host, run->host);
        study->sys_cpus = run->cpus > 0 ? run->cpus : 0;
        study->sys_memory_gib = run->memory_gib > 0 ? run->memory_gib : 0;
    }
    /* a 1-process run has no MPI library to name: a run under MPI says more */
    if (strstr(run->libraries, "MPI") && !strstr(study->sys_libraries, "MPI"))
        copy_text(study->sys_libraries, sizeof study->sys_libraries, run->libraries);
    if (run->hosts > study->hosts_max) study->hosts_max = run->hosts;
    if (run->data[0]) copy_text(study->data, sizeof study->data, run->data);
    row->t_data = row->t_compute = row->t_comm = row->t_comm_exposed = -1;
    row->bytes_sent = row->final_loss = row->test_acc = -1;
    row->t_train_min = row->t_train_max = row->t_epoch_min = row->t_epoch_max = -1;
    row->repeats = 1;
    row->other_cores = log.has_load ? known(log.load.other_cores, -1) : -1;
    row->throttled = log.has_load ? known(log.load.throttled_max, -1) : -1;
    row->host_cpus = log.has_load ? known(log.load.host_cpus, -1) : -1;
    sys_summary(&log, row);
    if (log.n_epochs > 0) {
        /* times of the 2nd epoch (the 1st warms caches), or of the only one */
        const dt_epoch_record *m = &log.epochs[log.n_epochs >= 2 ? 1 : 0];
        row->t_train = known(m->t_train, -1);
        row->t_epoch = known(m->t_epoch, -1);
        /* dtrain writes both, positive: without them no speed-up is known (n/a, not 0) */
        if (!(row->t_train > 0) || !(row->t_epoch > 0)) {
            row->t_train = row->t_epoch = -1;
            dt_scale_add_note(study,
                              "%s: its epoch record has no valid t_train and t_epoch "
                              "(missing or not positive): its speed-ups are n/a",
                              path);
        }
        row->t_data = known(m->t_data_mean, -1);
        row->t_compute = known(m->t_compute_mean, -1);
        row->t_comm = known(m->t_comm_mean, -1);
        row->t_comm_exposed = known(m->t_comm_exposed_mean, -1);
        row->bytes_sent =
            m->bytes_sent >= 0 && row->procs > 0 ? (double)m->bytes_sent / row->procs : -1;
        /* the measured epoch's straggler (trainer.c, metrics/straggler.h) */
        if (m->straggler >= 0)
            dt_scale_add_note(study,
                              "straggler in %d processes x batch %d: rank %d (%s): %.0f%% slower "
                              "compute, the others waited %.3g s a step for it",
                              row->procs, row->batch, m->straggler, m->straggler_host,
                              100.0 * m->straggler_slower, m->straggler_wait);
        const dt_epoch_record *last = &log.epochs[log.n_epochs - 1];
        row->final_loss = known(last->train_loss, -1);
        row->test_acc = known(last->test_acc, -1);
    }
    *complete = run->epochs > 0 && log.n_epochs >= run->epochs;
    if (*complete && add_roles(path, &log, row, study, err)) {
        dt_runlog_contents_free(&log);
        return -1;
    }
    if (log.truncated_lines && *complete)
        dt_scale_add_note(study, "%s: its last line is cut short (skipped)", path);
    dt_runlog_contents_free(&log);
    return 0;
}

/* The cores other processes used during a finished log's run when that flags it busy
 * (its load record above DT_SCALE_BUSY_CORES) or its emulated hosts ran out of their
 * CPU quota (*throttled: the share of periods, else -1), else -1: quiet, not measured,
 * not finished or not readable (the checks that follow decide about those). Such a run
 * is measured again by a later sweep instead of being kept. */
static double busy_cores_of_log(const char *path, double *throttled) {
    *throttled = -1;
    dt_runlog_contents log;
    if (dt_runlog_load(path, &log, NULL)) return -1;
    const int finished = log.has_run && log.run.epochs > 0 && log.n_epochs >= log.run.epochs;
    const double other = finished && log.has_load ? known(log.load.other_cores, -1) : -1;
    const double held = finished && log.has_load ? known(log.load.throttled_max, -1) : -1;
    dt_runlog_contents_free(&log);
    if (held > DT_SCALE_THROTTLED_MAX) *throttled = held;
    return other > DT_SCALE_BUSY_CORES || *throttled >= 0 ? (other > 0 ? other : 0) : -1;
}

int dt_scale_read_dir(const char *dir, dt_scale_study *study, dt_error *err) {
    DIR *d = opendir(dir);
    if (!d) return dt_error_set(err, "cannot open %s: %s", dir, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "run_", 4) || n < 7 || strcmp(e->d_name + n - 6, ".jsonl")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        dt_scale_row row;
        int complete;
        if (dt_scale_row_from_log(path, study, &row, &complete, err))
            rc = -1;
        else if (!complete)
            dt_scale_add_note(study, "%s is incomplete (an interrupted run); left out", e->d_name);
        else
            rc = dt_scale_add_row(study, &row, err);
    }
    closedir(d);
    if (rc == 0 && study->n_rows == 0)
        rc = dt_error_set(err, "%s holds no complete run logs (run_*.jsonl)", dir);
    if (rc == 0 && dt_scale_read_predictions(study, dir, err) < 0) rc = -1;
    return rc ? rc : dt_scale_combine(study, err);
}

/* Progress from the run log the child is writing: its run record (steps per epoch)
 * and last step record. Best effort: a line that does not parse is passed over, as
 * the log is read in full (and its errors reported) once the run ends. */
static void show_progress(FILE *log, long *offset, int index, int total, int procs, int batch,
                          int epochs, long *steps_per_epoch, double started) {
    if (!log || fseek(log, *offset, SEEK_SET) != 0) return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long step = -1, got = 0;
    int epoch = 0;
    dt_runlog_entry entry;
    while ((len = getline(&line, &cap, log)) > 0) {
        if (line[len - 1] != '\n') break; /* half-written: read it next time */
        *offset = ftell(log);
        if (dt_runlog_parse_line(line, &entry, NULL)) continue;
        if (entry.event == DT_EVENT_RUN && entry.run.steps_per_epoch > 0)
            *steps_per_epoch = entry.run.steps_per_epoch;
        if (entry.event == DT_EVENT_STEP) {
            epoch = entry.step.epoch >= 0 ? entry.step.epoch : 0;
            step = entry.step.step;
            got = 1;
        }
    }
    free(line);
    clearerr(log); /* at the end for now: the child writes more */
    if (!got) return;
    double elapsed = dt_now() - started;
    long done = step + 1, all = *steps_per_epoch * epochs;
    double rate = done * (double)batch * procs / elapsed;
    double eta = done > 0 ? elapsed / done * (all - done) : 0;
    fprintf(stderr,
            "\r\033[K[config %d/%d] %d proc%s, batch %d: epoch %d/%d, step %ld/%ld, "
            "%.0f img/s, ETA %.0f s",
            index, total, procs, procs > 1 ? "s" : "", batch, epoch + 1, epochs,
            done - epoch * *steps_per_epoch, *steps_per_epoch, rate, eta);
}

/* The signal that asked the sweep to stop, or 0. A signal handler can only set a flag;
 * the wait loop below passes the signal on to the run's process group. */
static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig) {
    stop_signal = sig;
}

/* The settings a config's log was made with, beside it: the child's arguments (not
 * the binary's path nor the log's), one per line. A log is reused only when these
 * are the sweep's current ones. */
static void args_path(char *out, size_t size, const char *log) {
    snprintf(out, size, "%s.args", log);
}

/* Whether the line of length len at line is one of text's lines. */
static int has_line(const char *text, const char *line, size_t len) {
    for (const char *t = text; *t;) {
        const size_t n = strcspn(t, "\n");
        if (n == len && !memcmp(t, line, len)) return 1;
        t += n + (t[n] == '\n');
    }
    return 0;
}

/* The line of text that sets the same thing as line (its first word), or NULL. */
static const char *same_key(const char *text, const char *line) {
    const size_t key = strcspn(line, " \n");
    for (const char *t = text; *t;) {
        const size_t n = strcspn(t, "\n");
        if (strcspn(t, " \n") == key && !memcmp(t, line, key)) return t;
        t += n + (t[n] == '\n');
    }
    return NULL;
}

/* The first setting two argument lists (a line each) disagree on, for the message:
 * "'--max-samples 64' in the log, '--max-samples 48' now" ("the default" for a flag
 * one of them leaves out). */
static void first_difference(const char *old, const char *now, char *out, size_t size) {
    for (int pass = 0; pass < 2; pass++) {
        const char *a = pass ? old : now, *b = pass ? now : old;
        for (const char *t = a; *t;) {
            const size_t n = strcspn(t, "\n");
            if (!has_line(b, t, n)) {
                const char *other = same_key(b, t);
                char mine[300], theirs[300];
                snprintf(mine, sizeof mine, "'%.*s'", (int)n, t);
                if (other)
                    snprintf(theirs, sizeof theirs, "'%.*s'", (int)strcspn(other, "\n"), other);
                else
                    snprintf(theirs, sizeof theirs, "the default");
                snprintf(out, size, "%.250s in the log, %.250s now", pass ? mine : theirs,
                         pass ? theirs : mine);
                return;
            }
            t += n + (t[n] == '\n');
        }
    }
    snprintf(out, size, "the same settings in another order");
}

/* log's recorded settings (LOG.args: a regular file of at most 64 KiB, read whole), or
 * NULL with why: "its settings were not recorded" when there is none, else what is
 * wrong with it (a FIFO there is refused, not waited on). */
static char *recorded_settings(const char *log, char *why, size_t size) {
    char path[4300];
    args_path(path, sizeof path, log);
    dt_error e;
    char *text = dt_text_file_read(path, "settings", (size_t)64 << 10, &e);
    if (!text && access(path, F_OK) != 0)
        snprintf(why, size, "its settings were not recorded");
    else if (!text)
        snprintf(why, size, "%.500s", e.msg);
    return text;
}

/* Whether log's recorded settings are args; if not, why in out. */
static int same_settings(const char *log, const char *args, char *why, size_t size) {
    char *old = recorded_settings(log, why, size);
    if (!old) return 0;
    const int same = !strcmp(old, args);
    if (!same) first_difference(old, args, why, size);
    free(old);
    return same;
}

/* A launch over other hosts (mpirun_extra: emulated hosts, a hostfile) whose ranks have
 * not written a line of their log after this long never started: once in a few dozen
 * 4-host sweeps one host's Open MPI daemon did not come up, and mpirun waited for it
 * forever (its orte_startup_timeout did not end the wait). */
enum { START_TIMEOUT_S = 120, NOT_STARTED = 2 };

/* DTRAIN_START_TIMEOUT in seconds (a positive number; tests shorten it), else
 * START_TIMEOUT_S. */
static double start_timeout_s(void) {
    const char *text = getenv("DTRAIN_START_TIMEOUT");
    double v;
    dt_error ignored;
    return text && !dt_parse_double("DTRAIN_START_TIMEOUT", text, 1e-3, 1e6, &v, &ignored)
               ? v
               : START_TIMEOUT_S;
}

/* Adds b's CPU times to a's. */
static void add_rusage(struct rusage *a, const struct rusage *b) {
    a->ru_utime.tv_sec += b->ru_utime.tv_sec;
    a->ru_utime.tv_usec += b->ru_utime.tv_usec;
    a->ru_stime.tv_sec += b->ru_stime.tv_sec;
    a->ru_stime.tv_usec += b->ru_stime.tv_usec;
}

/* Ends the processes whose parent is this one (orphans of a run handed to us). */
static void kill_own_children(void) {
    DIR *d = opendir("/proc");
    if (!d) return;
    const pid_t self = getpid();
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        errno = 0;
        const long pid = strtol(e->d_name, &end, 10);
        if (errno || *end || pid <= 0) continue;
        char path[64], line[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        const int got = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        /* "pid (comm) state ppid ...": comm may hold spaces and parentheses */
        const char *close = got ? strrchr(line, ')') : NULL;
        long ppid;
        if (close && sscanf(close + 1, " %*c %ld", &ppid) == 1 && ppid == (long)self)
            kill((pid_t)pid, SIGKILL);
    }
    closedir(d);
}

/* Reaps what a run leaves once mpirun has ended, adding its CPU time to *usage. The
 * Open MPI daemons of the other hosts (ours, for emulated hosts) daemonize: they leave
 * mpirun's process group and session and are handed to the sweep (a child subreaper
 * while a run lasts), and they hold the CPU time of the ranks they started, which the
 * machine's counters saw. Left out, it showed as "other processes" and flagged every
 * run over emulated hosts busy. The sweep has no other children during a run, so any
 * child is the run's. Waits at most 10 s for them to end, then ends them. */
static void reap_orphans(struct rusage *usage) {
    const double until = dt_now() + 10.0;
    int killed = 0;
    for (;;) {
        struct rusage ru;
        int status;
        const pid_t r = wait4(-1, &status, WNOHANG, &ru);
        if (r > 0) {
            add_rusage(usage, &ru);
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return; /* ECHILD: none left */
        if (!killed && dt_now() > until) {
            kill_own_children();
            killed = 1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The machine's idle share over each second of a run, its least kept: Mininet-HiFi
 * counts an emulation faithful where the machine kept idle time every second, which a
 * mean can hide (docs/scaling.md: what it says here). */
typedef struct idle_watch {
    unsigned long long busy, total;
    double at, min;
    int ok;
} idle_watch;

static void idle_watch_start(idle_watch *w) {
    w->ok = dt_sysmon_machine_ticks(&w->busy, &w->total) == 0;
    w->at = dt_now();
    w->min = NAN;
}

/* A sample every second or more; final: whatever has passed since the last (a run
 * shorter than a second has one sample, over all of it). */
static void idle_watch_sample(idle_watch *w, int final) {
    if (!w->ok || (!final && dt_now() - w->at < 1.0)) return;
    unsigned long long busy, total;
    if (dt_sysmon_machine_ticks(&busy, &total) != 0 || total <= w->total) return;
    const double idle = 1.0 - (double)(busy - w->busy) / (double)(total - w->total);
    if (!(idle >= w->min)) w->min = idle;
    w->busy = busy, w->total = total, w->at = dt_now();
}

/* Every emulated host's CPU counters into u; -1 if one cannot be read. */
static int read_hosts(const dt_hostcpu *c, dt_hostcpu_usage *u) {
    for (int h = 0; h < c->made; h++)
        if (dt_hostcpu_read(c, h + 1, &u[h])) return -1;
    return 0;
}

/* One run's training settings: the sweep's, with this config's batch size and
 * learning-rate scaling (warm-up goes with scaling), and repeat k's seed, --seed + k:
 * repeats time the same config again and, with seeds of their own, give the
 * time-to-target study independent loss curves to average (tta.h) instead of copies
 * of one. */
static dt_train_config run_settings(const dt_sweep_config *cfg, int batch, int scaled, int repeat) {
    dt_train_config run = cfg->train;
    run.batch_size = batch;
    run.lr_scaling_linear = scaled;
    run.warmup_epochs = scaled ? cfg->train.warmup_epochs : 0;
    run.seed = cfg->train.seed + (uint64_t)repeat;
    run.log_path = NULL; /* where the log goes is not a setting of the run */
    return run;
}

/* Runs one configuration into log (written as log.partial and renamed when the run
 * succeeds, so a finished log is replaced only by another finished one); returns 0,
 * 1 if it does not fit in memory, NOT_STARTED if its ranks never started (ended after
 * start_timeout_s(); err says so), -1 on error. */
static int run_attempt(const dt_sweep_config *cfg, int procs, int batch, int scaled, int repeat,
                       const char *log, int index, int total, dt_error *err) {
    char errpath[4200], partial[4200], argspath[4200];
    snprintf(errpath, sizeof errpath, "%s.stderr", log);
    snprintf(partial, sizeof partial, "%s.partial", log);
    args_path(argspath, sizeof argspath, log);
    /* The child's flags: the sweep's training config with this run's settings. */
    dt_train_config run = run_settings(cfg, batch, scaled, repeat);
    run.log_path = partial;
    char args[8192];
    if (dt_sweep_args(cfg, procs, batch, scaled, repeat, args, sizeof args, err)) return -1;
    const dt_train_mode *mode;
    if (dt_train_mode_of(&run, &mode, err)) return -1;
    char np[16], flag_text[2048];
    snprintf(np, sizeof np, "%d", procs + (mode->has_servers ? run.ps.servers : 0));
    const char *argv[96];
    const int argv_size = (int)(sizeof argv / sizeof *argv);
    int a = 0;
    char mpi[64];
    if (cfg->srun && (procs > 1 || mode->has_servers)) {
        /* PMIx: what Debian's Slurm and Open MPI share (docs/cluster.md); a failed rank
         * ends the step, as mpirun ends its job */
        const char *mpi_type = getenv("SLURM_MPI_TYPE");
        snprintf(mpi, sizeof mpi, "--mpi=%s", mpi_type && *mpi_type ? mpi_type : "pmix");
        argv[a++] = "srun";
        argv[a++] = "-n";
        argv[a++] = np;
        argv[a++] = mpi;
        argv[a++] = "--kill-on-bad-exit=1";
    } else {
        /* emulated hosts: one process too runs in host 1, on its CPU share (in the
         * machine's open, its loader thread took the other core: lenet5 3.6 ms a step
         * there, 4.4 on host 1's half CPU, as its profile) */
        for (int k = 0; cfg->launch_pre && cfg->launch_pre[k] && a < 16; k++)
            argv[a++] = cfg->launch_pre[k];
    }
    if (!cfg->srun && (procs > 1 || mode->has_servers)) {
        argv[a++] = "mpirun";
        argv[a++] = "-np";
        argv[a++] = np;
        for (int k = 0; cfg->mpirun_extra && cfg->mpirun_extra[k] && a < 48; k++)
            argv[a++] = cfg->mpirun_extra[k];
    }
    argv[a++] = cfg->dtrain;
    argv[a++] = "train";
    /* room left for --quiet and the closing NULL */
    const int flags =
        dt_train_flags_to_argv(&run, argv + a, argv_size - a - 2, flag_text, sizeof flag_text, err);
    if (flags < 0) return -1;
    a += flags;
    argv[a++] = "--quiet";
    argv[a] = NULL;
    unlink(partial);
    unsigned long long busy0 = 0, total0 = 0, busy1 = 0, total1 = 0;
    const int have_ticks = dt_sysmon_machine_ticks(&busy0, &total0) == 0;
    idle_watch idle;
    idle_watch_start(&idle);
    dt_hostcpu_usage hosts0[DT_HOSTCPU_MAX_HOSTS];
    const int have_hosts = cfg->hostcpu && read_hosts(cfg->hostcpu, hosts0) == 0;
    double started = dt_now();
    /* SIGINT/SIGTERM (caught for the whole sweep by dt_sweep_run): passed on to the
     * run's process group (mpirun and its ranks), which is waited for, so killing the
     * sweep leaves nothing running */
    const int subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
    /* Open MPI's settings for running as root and for more ranks than cores */
    static const char *const ompi[] = {
        "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
        "OMPI_MCA_rmaps_base_oversubscribe=1", "OMPI_MCA_mpi_yield_when_idle=1", NULL};
    /* a SIGKILLed sweep cannot pass anything on: the kernel ends the run instead */
    const dt_proc_opts io = {.new_group = 1,
                             .death_signal = SIGTERM,
                             .stdin_path = "/dev/null",
                             .stdout_path = "/dev/null",
                             .stderr_path = errpath,
                             .env_defaults = ompi};
    dt_proc proc;
    if (dt_proc_spawn(&proc, argv, &io, err)) {
        if (subreaper) prctl(PR_SET_CHILD_SUBREAPER, 0);
        return -1;
    }
    FILE *logf = NULL;
    long offset = 0, steps_per_epoch = 1;
    const int live = !cfg->quiet && isatty(STDERR_FILENO); /* else a line per config */
    int status = 0, forwarded = 0, not_started = 0;
    char where[1024] = ""; /* a hung launch: what ran in each emulated host */
    double stop_at = 0;
    const int watch_start = procs > 1 && cfg->mpirun_extra;
    const double start_timeout = start_timeout_s();
    struct rusage usage; /* the whole run's: mpirun waits for its ranks */
    memset(&usage, 0, sizeof usage);
    for (;;) {
        if (dt_proc_wait(&proc, 0, &status, &usage) != 0) break;
        if (stop_signal && !forwarded) {
            dt_proc_kill(&proc, stop_signal);
            forwarded = stop_signal;
            stop_at = dt_now();
        } else if (forwarded && dt_now() - stop_at > 10) {
            dt_proc_kill(&proc, SIGKILL); /* mpirun did not end its ranks in 10 s */
        } else if (watch_start && !not_started && dt_now() - started > start_timeout &&
                   access(partial, F_OK) != 0) {
            if (cfg->netns) dt_netns_processes(cfg->netns, where, sizeof where);
            dt_proc_kill(&proc, SIGTERM);
            forwarded = not_started = SIGTERM;
            stop_at = dt_now();
        }
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
        idle_watch_sample(&idle, 0);
        if (!live || forwarded) continue;
        if (!logf) logf = fopen(partial, "r"); /* once the child has created it */
        show_progress(logf, &offset, index, total, procs, batch, cfg->train.epochs,
                      &steps_per_epoch, started);
    }
    if (logf) fclose(logf);
    if (subreaper) {
        reap_orphans(&usage);
        prctl(PR_SET_CHILD_SUBREAPER, 0);
    }
    if (live) fputs("\r\033[K", stderr);
    if (not_started) {
        unlink(partial);
        if (where[0])
            fprintf(stderr, "dtrain scale: what ran in the emulated hosts when it was ended: %s\n",
                    where);
        /* kept apart: the next attempt writes errpath anew and removes it when it runs */
        char hung[4300];
        snprintf(hung, sizeof hung, "%s.hung.stderr", log);
        dt_error_set(err,
                     "the run with %d processes, batch %d, did not start within %g s (an Open "
                     "MPI daemon on another host did not come up; see %s)",
                     procs, batch, start_timeout, rename(errpath, hung) ? errpath : hung);
        return NOT_STARTED;
    }
    if (forwarded) {
        unlink(partial);
        unlink(errpath);
        return dt_error_set(err,
                            "stopped by signal %d (%s): the run with %d process%s, batch %d, "
                            "was ended with it",
                            forwarded, strsignal(forwarded), procs, procs > 1 ? "es" : "", batch);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        unlink(errpath);
        const double wall = dt_now() - started;
        const long hz = sysconf(_SC_CLK_TCK), cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (have_ticks && dt_sysmon_machine_ticks(&busy1, &total1) == 0 && wall > 0 && hz > 0) {
            const double run_cpu = (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 +
                                   (double)usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
            dt_load_record load = {.wall_s = wall,
                                   .machine_cores = (double)(busy1 - busy0) / hz / wall,
                                   .run_cores = run_cpu / wall,
                                   .cores = (int)cores};
            load.other_cores = load.machine_cores - load.run_cores;
            if (load.other_cores < 0) load.other_cores = 0;
            idle_watch_sample(&idle, 1);
            load.idle_mean =
                total1 > total0 ? 1.0 - (double)(busy1 - busy0) / (double)(total1 - total0) : NAN;
            load.idle_min = idle.min;
            load.host_cpus = load.throttled_max = load.host_used_min = NAN;
            dt_hostcpu_usage hosts1[DT_HOSTCPU_MAX_HOSTS];
            if (have_hosts && read_hosts(cfg->hostcpu, hosts1) == 0) {
                load.host_cpus = cfg->hostcpu->cpus;
                load.throttled_max = 0;
                for (int h = 0; h < cfg->hostcpu->made; h++) {
                    const long periods = hosts1[h].periods - hosts0[h].periods;
                    const double held =
                        periods > 0 ? (double)(hosts1[h].throttled - hosts0[h].throttled) / periods
                                    : 0;
                    if (held > load.throttled_max) load.throttled_max = held;
                    const double used = (hosts1[h].cpu_s - hosts0[h].cpu_s) / wall;
                    if (!(used >= load.host_used_min)) load.host_used_min = used;
                }
            }
            if (dt_runlog_append_load(partial, &load, err)) return -1;
        }
        /* old settings out first: a kill between the steps leaves a log with none, which
         * runs again, never one with another log's settings */
        unlink(argspath);
        if (rename(partial, log) != 0)
            return dt_error_set(err, "cannot rename %s: %s", partial, strerror(errno));
        dt_outfile out;
        if (dt_outfile_open(&out, argspath, err)) return -1;
        fputs(args, out.f);
        return dt_outfile_commit(&out, err);
    }
    unlink(partial);
    /* The child's own one-line error, for the memory stop or to pass on; else the first
     * line of what the launcher said (mpirun's "ssh: ... Connection refused" for a host
     * it cannot reach), past its banners of dashes. */
    char first[512] = "", other[512] = "";
    FILE *e = fopen(errpath, "r");
    if (e) {
        char line[512];
        while (!first[0] && fgets(line, sizeof line, e)) {
            line[strcspn(line, "\r\n")] = 0; /* ssh ends its lines with \r\n */
            if (!strncmp(line, "dtrain", 6))
                snprintf(first, sizeof first, "%s", line);
            else if (!other[0] && line[strspn(line, " \t-=*")])
                snprintf(other, sizeof other, "%s", line);
        }
        fclose(e);
    }
    if (strstr(first, "does not fit in memory")) {
        unlink(errpath); /* the report's note says it */
        return 1;
    }
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (!first[0] && other[0])
        return dt_error_set(err, "run with %d process%s, batch %d failed (%s: %s; see %s)", procs,
                            procs > 1 ? "es" : "", batch, prog, other, errpath);
    return dt_error_set(err, "run with %d process%s, batch %d failed (%s; see %s)", procs,
                        procs > 1 ? "es" : "", batch, first[0] ? first : "no message", errpath);
}

/* run_attempt, and once more if the ranks never started (saying so on stderr). */
static int run_config(const dt_sweep_config *cfg, int procs, int batch, int scaled, int repeat,
                      const char *log, int index, int total, dt_error *err) {
    int rc = run_attempt(cfg, procs, batch, scaled, repeat, log, index, total, err);
    if (rc != NOT_STARTED) return rc;
    fprintf(stderr, "dtrain scale: %s; starting it again\n", err->msg);
    rc = run_attempt(cfg, procs, batch, scaled, repeat, log, index, total, err);
    return rc == NOT_STARTED ? -1 : rc;
}

int dt_sweep_args(const dt_sweep_config *cfg, int procs, int batch, int scaled, int repeat,
                  char *out, size_t size, dt_error *err) {
    const dt_train_config run = run_settings(cfg, batch, scaled, repeat);
    const char *argv[96];
    char text[2048];
    const int n = dt_train_flags_to_argv(&run, argv, 95, text, sizeof text, err);
    if (n < 0) return -1;
    size_t used = (size_t)snprintf(out, size, "procs %d\n", procs);
    if (cfg->hosts && used < size)
        used += (size_t)snprintf(out + used, size - used, "hosts %s\n", cfg->hosts);
    if (cfg->srun && used < size)
        used += (size_t)snprintf(out + used, size - used, "launcher srun\n");
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", argv[i],
                                 i + 1 < n && argv[i + 1][0] != '-' ? " " : "\n");
    if (used >= size) return dt_error_set(err, "too many arguments for a sweep's run");
    return 0;
}

int dt_make_dirs(const char *path, dt_error *err) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return dt_error_set(err, "cannot create %s: %s", buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    return 0;
}

/* Waits until other processes use less than DT_SCALE_BUSY_CORES cores for two
 * seconds running (the sweep runs nothing meanwhile), at most max_s; returns whether
 * the machine got quiet. */
static int wait_idle(double max_s, int quiet) {
    const double give_up = dt_now() + max_s;
    int quiet_seconds = 0, said = 0;
    unsigned long long b0, t0, b1, t1;
    if (dt_sysmon_machine_ticks(&b0, &t0)) return 0;
    const long hz = sysconf(_SC_CLK_TCK);
    while (dt_now() < give_up && !stop_signal) {
        double start = dt_now();
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
        if (dt_sysmon_machine_ticks(&b1, &t1)) return 0;
        const double busy = (double)(b1 - b0) / (hz > 0 ? hz : 100) / (dt_now() - start);
        b0 = b1;
        quiet_seconds = busy < DT_SCALE_BUSY_CORES ? quiet_seconds + 1 : 0;
        if (quiet_seconds >= 2) return 1;
        if (!quiet && !said) {
            fprintf(stderr, "waiting for a quiet machine (other processes use %.2f cores)\n", busy);
            said = 1;
        }
    }
    return 0;
}

static int sweep_all(const dt_sweep_config *cfg, dt_scale_study *study, dt_error *err);

int dt_sweep_run(const dt_sweep_config *cfg, dt_scale_study *study, dt_error *err) {
    struct sigaction stop = {.sa_handler = on_stop_signal}, old_int, old_term;
    sigemptyset(&stop.sa_mask);
    stop_signal = 0;
    sigaction(SIGINT, &stop, &old_int);
    sigaction(SIGTERM, &stop, &old_term);
    const int rc = sweep_all(cfg, study, err);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}

/* args without the lines that differ between one study's configs (process count,
 * batch size, the linear-scaling variant and its warm-up): what makes it that study. */
static void study_lines(const char *args, char *out, size_t size) {
    static const char *const per_config[] = {"procs ", "--batch-size ", "--lr-scaling ",
                                             "--warmup-epochs ", NULL};
    size_t used = 0;
    out[0] = '\0';
    for (const char *line = args; *line;) {
        const size_t len = strcspn(line, "\n");
        int skip = 0;
        for (const char *const *p = per_config; *p && !skip; p++)
            skip = !strncmp(line, *p, strlen(*p));
        if (!skip && used + len + 2 < size) {
            memcpy(out + used, line, len);
            used += len;
            out[used++] = '\n';
            out[used] = '\0';
        }
        line += len + (line[len] == '\n');
    }
}

/* Whether log is the log of one of cfg's configs (dt_scale_log_path's name), and
 * which: its process count, batch size, linear-scaling variant and repeat. */
static int config_of_log(const dt_sweep_config *cfg, const char *log, int *procs, int *batch,
                         int *scaled, int *repeat) {
    const int repeats = cfg->repeats > 0 ? cfg->repeats : 1;
    for (int p = 0; p < cfg->n_procs; p++)
        for (int b = 0; b < cfg->n_batches; b++)
            for (int sc = 0; sc <= (cfg->lr_scaling && cfg->procs[p] > 1); sc++)
                for (int r = 0; r < repeats; r++) {
                    char path[4200];
                    dt_scale_log_path(path, sizeof path, cfg->out_dir, cfg->procs[p],
                                      cfg->batches[b], sc, r);
                    if (strcmp(path, log)) continue;
                    *procs = cfg->procs[p], *batch = cfg->batches[b], *scaled = sc;
                    *repeat = r;
                    return 1;
                }
    return 0;
}

/* Whether log, under the name of cfg's config (procs, batch, scaled), holds a run of
 * another config: its run record (what the run itself wrote, which a log copied over
 * the name keeps, unlike the .args beside it) names another model, data, batch size,
 * worker count, learning-rate scaling, epochs or seed. why: the first difference. A
 * log that cannot be read is not judged here (the sweep runs it again). */
/* A run record of 4701151 or before kept the model in char[64]: a path of 64 bytes or
 * more was written cut to its first 63. Such a record is the config's own when it is
 * that prefix, so a study those binaries began still resumes. */
static int old_cut_model(const char *recorded, const char *model) {
    return strlen(recorded) == 63 && strlen(model) > 63 && !strncmp(recorded, model, 63);
}

static int foreign_log(const dt_sweep_config *cfg, const char *log, int procs, int batch,
                       int scaled, int repeat, char *why, size_t size) {
    dt_runlog_contents c;
    if (dt_runlog_load(log, &c, NULL)) return 0;
    const dt_run_record *r = &c.run;
    const char *model = cfg->train.model ? cfg->train.model : "";
    const char *data = cfg->train.data ? cfg->train.data : "";
    const int workers = r->workers >= 0 ? r->workers : r->procs;
    const int linear = !strcmp(r->lr_scaling, "linear");
    const unsigned long long seed = run_settings(cfg, batch, scaled, repeat).seed;
    /* the first difference: what the log says, what this config says */
    char theirs[600] = "", ours[600] = "";
    if (!c.has_run) {
        snprintf(ours, sizeof ours, "none");
    } else if (strcmp(r->model, model) && !old_cut_model(r->model, model)) {
        snprintf(theirs, sizeof theirs, "model %.400s", r->model);
        snprintf(ours, sizeof ours, "%s", model);
    } else if (strcmp(r->data, data)) {
        snprintf(theirs, sizeof theirs, "data %.400s", r->data);
        snprintf(ours, sizeof ours, "%s", data);
    } else if (r->batch_size != batch) {
        snprintf(theirs, sizeof theirs, "batch size %d", r->batch_size);
        snprintf(ours, sizeof ours, "%d", batch);
    } else if (workers != procs) {
        snprintf(theirs, sizeof theirs, "%d worker%s", workers, workers == 1 ? "" : "s");
        snprintf(ours, sizeof ours, "%d", procs);
    } else if (linear != scaled) {
        snprintf(theirs, sizeof theirs, "lr scaling %s", r->lr_scaling);
        snprintf(ours, sizeof ours, "%s", scaled ? "linear" : "none");
    } else if (r->epochs != cfg->train.epochs) {
        snprintf(theirs, sizeof theirs, "%d epochs", r->epochs);
        snprintf(ours, sizeof ours, "%d", cfg->train.epochs);
    } else if (r->seed != seed) {
        snprintf(theirs, sizeof theirs, "seed %llu", r->seed);
        snprintf(ours, sizeof ours, "%llu", seed);
    }
    const int has_run = c.has_run;
    dt_runlog_contents_free(&c);
    if (!ours[0]) return 0;
    if (!has_run)
        snprintf(why, size, "it has no run record");
    else
        snprintf(why, size, "its run record says %.250s, this config %.250s", theirs, ours);
    return 1;
}

/* Refuses (unless --force) an --out folder whose run logs were made with other
 * settings: a config of this sweep whose recorded arguments differ, or a log of
 * another study (another model, data, ...) that would be mixed into the report. Checked
 * before any run, so nothing of the other study is replaced. */
static int check_out_dir(const dt_sweep_config *cfg, dt_error *err) {
    DIR *d = opendir(cfg->out_dir);
    if (!d) return dt_error_set(err, "cannot open %s: %s", cfg->out_dir, strerror(errno));
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "run_", 4) || n < 12 || strcmp(e->d_name + n - 11, ".jsonl.args"))
            continue;
        char log[4200], mine[8192], why[600];
        snprintf(log, sizeof log, "%s/%.*s", cfg->out_dir, (int)(n - 5), e->d_name);
        int procs, batch, scaled, repeat;
        if (config_of_log(cfg, log, &procs, &batch, &scaled, &repeat)) {
            if (dt_sweep_args(cfg, procs, batch, scaled, repeat, mine, sizeof mine, err)) {
                rc = -1;
                break;
            }
        } else { /* not a config of this sweep: only what makes the study must agree,
                  * the seed as the same repeat of this sweep's would have it */
            char ours[8192], ours_study[8192];
            if (dt_sweep_args(cfg, cfg->procs[0], cfg->batches[0], 0, repeat_of(log), ours,
                              sizeof ours, err)) {
                rc = -1;
                break;
            }
            study_lines(ours, ours_study, sizeof ours_study);
            char *theirs = recorded_settings(log, why, sizeof why);
            if (!theirs && !strcmp(why, "its settings were not recorded")) continue;
            if (!theirs) {
                rc = dt_error_set(err, "--out %s: %s", cfg->out_dir, why);
                break;
            }
            char theirs_study[8192];
            study_lines(theirs, theirs_study, sizeof theirs_study);
            free(theirs);
            if (!strcmp(theirs_study, ours_study)) continue;
            first_difference(theirs_study, ours_study, why, sizeof why);
            rc = dt_error_set(err,
                              "--out %s holds another study (%.*s: %s); give another --out, or "
                              "--force to run this one there",
                              cfg->out_dir, (int)(n - 5), e->d_name, why);
            break;
        }
        /* a config of this sweep (the other branch ends each pass) */
        if (!same_settings(log, mine, why, sizeof why) ||
            foreign_log(cfg, log, procs, batch, scaled, repeat, why, sizeof why))
            rc = dt_error_set(err,
                              "--out %s holds runs of other settings (%.*s: %s); give another "
                              "--out, or --force to run them again",
                              cfg->out_dir, (int)(n - 5), e->d_name, why);
    }
    closedir(d);
    return rc;
}

static int sweep_all(const dt_sweep_config *cfg, dt_scale_study *study, dt_error *err) {
    if (dt_make_dirs(cfg->out_dir, err) || (!cfg->force && check_out_dir(cfg, err))) return -1;
    snprintf(study->model, sizeof study->model, "%s", cfg->train.model);
    snprintf(study->data, sizeof study->data, "%s", cfg->train.data);
    study->target_loss = cfg->target_loss;
    const int repeats = cfg->repeats > 0 ? cfg->repeats : 1;
    int total = 0, index = 0, n_batches = cfg->n_batches, never_quiet = 0;
    for (int b = 0; b < cfg->n_batches; b++)
        for (int p = 0; p < cfg->n_procs; p++) total += 1 + (cfg->lr_scaling && cfg->procs[p] > 1);
    total *= repeats;
    /* Repeats interleave: every config once, then every config again, so a slow spell
     * of the machine spreads over configs rather than sinking one. */
    for (int rep = 0; rep < repeats; rep++) {
        int drift_taken = rep == 0 || !cfg->network; /* pass 1's profile is the prediction's */
        for (int b = 0; b < n_batches; b++) {
            int memory_stop = 0;
            for (int p = 0; p < cfg->n_procs && !memory_stop; p++) {
                for (int scaled = 0; scaled <= (cfg->lr_scaling && cfg->procs[p] > 1); scaled++) {
                    char log[4096];
                    dt_scale_log_path(log, sizeof log, cfg->out_dir, cfg->procs[p], cfg->batches[b],
                                      scaled, rep);
                    index++;
                    dt_scale_row row;
                    int complete = 0;
                    char args[8192], why[600];
                    if (dt_sweep_args(cfg, cfg->procs[p], cfg->batches[b], scaled, rep, args,
                                      sizeof args, err))
                        return -1;
                    const int have_log = !cfg->force && access(log, R_OK) == 0;
                    double busy_before = -1;      /* its finished run's other cores, if busy */
                    double throttled_before = -1; /* ... its hosts' throttling, if unfaithful */
                    if (have_log && !same_settings(log, args, why, sizeof why)) {
                        if (!cfg->quiet)
                            fprintf(stderr,
                                    "[config %d/%d] %d proc%s, batch %d: its log was made with "
                                    "other settings (%s); running again\n",
                                    index, total, cfg->procs[p], cfg->procs[p] > 1 ? "s" : "",
                                    cfg->batches[b], why);
                    } else if (have_log &&
                               (busy_before = busy_cores_of_log(log, &throttled_before)) < 0 &&
                               dt_scale_row_from_log(log, study, &row, &complete, NULL) == 0 &&
                               complete) {
                        if (!cfg->quiet)
                            fprintf(stderr,
                                    "[config %d/%d] %d proc%s, batch %d: done before, kept "
                                    "(--force to run again)\n",
                                    index, total, cfg->procs[p], cfg->procs[p] > 1 ? "s" : "",
                                    cfg->batches[b]);
                        if (dt_scale_add_row(study, &row, err)) return -1;
                        continue;
                    }
                    if (cfg->wait_idle && !wait_idle(cfg->wait_idle_max_s, cfg->quiet))
                        never_quiet++;
                    if (stop_signal) /* between runs: nothing to pass on */
                        return dt_error_set(err, "stopped by signal %d (%s)", (int)stop_signal,
                                            strsignal(stop_signal));
                    if (!drift_taken) { /* before this pass's first run */
                        drift_taken = 1;
                        if (dt_scale_profile_drift(cfg, rep, stderr, err)) return -1;
                    }
                    int rc = run_config(cfg, cfg->procs[p], cfg->batches[b], scaled, rep, log,
                                        index, total, err);
                    if (rc < 0) return -1;
                    if (rc == 1) {
                        dt_scale_add_note(study,
                                          "batch size %d per process does not fit in memory with "
                                          "%d process%s; the sweep stopped there (larger batch "
                                          "sizes were not run)",
                                          cfg->batches[b], cfg->procs[p],
                                          cfg->procs[p] > 1 ? "es" : "");
                        memory_stop = 1;
                        break;
                    }
                    if (dt_scale_row_from_log(log, study, &row, &complete, err) ||
                        dt_scale_add_row(study, &row, err))
                        return -1;
                    if (!cfg->quiet) {
                        /* " (machine busy)"; a run that replaced a busy one says so */
                        const int busy = row.other_cores > DT_SCALE_BUSY_CORES;
                        const int unfaithful = row.throttled > DT_SCALE_THROTTLED_MAX;
                        /* now: "unfaithful: ...; machine busy; " as they apply */
                        char note[400] = "", now[200] = "";
                        if (unfaithful)
                            snprintf(now, sizeof now,
                                     "unfaithful: a host ran out of its CPU quota in %.0f%% of "
                                     "periods; ",
                                     100 * row.throttled);
                        if (busy) strcat(now, "machine busy; ");
                        if (throttled_before >= 0)
                            snprintf(note, sizeof note,
                                     " (%sunfaithful before, measured again: a host ran out of "
                                     "its CPU quota in %.0f%% of periods)",
                                     now, 100 * throttled_before);
                        else if (busy_before >= 0)
                            snprintf(note, sizeof note,
                                     " (%sbusy before, measured again: other processes used "
                                     "%.2f cores then, %.2f now)",
                                     now, busy_before, row.other_cores);
                        else if (now[0]) {
                            now[strlen(now) - 2] = 0; /* the last "; " */
                            snprintf(note, sizeof note, " (%s)", now);
                        }
                        fprintf(stderr,
                                "[config %d/%d] %d proc%s, batch %d: epoch time %.2f s, test "
                                "accuracy %.2f%%%s\n",
                                index, total, row.procs, row.procs > 1 ? "s" : "", row.batch,
                                row.t_epoch, 100.0 * row.test_acc, note);
                    }
                }
            }
            if (memory_stop) { /* later repeats stop there too */
                n_batches = b;
                break;
            }
        }
    }
    if (never_quiet)
        dt_scale_add_note(study,
                          "--wait-idle: the machine did not get quiet within %.0f s before %d "
                          "run%s; they ran anyway",
                          cfg->wait_idle_max_s, never_quiet, never_quiet > 1 ? "s" : "");
    return dt_scale_combine(study, err);
}
